"""Tests of CLIPEmbedder with a tiny random open_clip model (no weights file needed)."""

import json
import os
import pickle
import warnings

import numpy as np
import pytest

open_clip = pytest.importorskip("open_clip")

import torch  # noqa: E402
from PIL import Image  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

from skicml import _weights  # noqa: E402
from skicml.clip import CLIPEmbedder, WhitenedCLIPScorer, WhiteningLikelihood  # noqa: E402
from skicml.clip import _embedder  # noqa: E402
from skicml.clip._model import build_clip  # noqa: E402
from skicml.datasets import make_shape_scenes  # noqa: E402
from skicml.utils._test_common import CLIP_TEST_CONFIG  # noqa: E402

CONFIG = CLIP_TEST_CONFIG


def embedder(**params):
    params = {"model_config": CONFIG, "random_state": 0, "device": "cpu", **params}
    return CLIPEmbedder(**params)


@pytest.fixture(scope="module")
def scenes():
    images, captions, _ = make_shape_scenes(12, random_state=0)
    return images, list(captions)


def test_shapes_determinism_and_fingerprint(scenes):
    images, captions = scenes
    a = embedder().fit(images)
    out = a.transform(images)
    assert out.shape == (12, CONFIG["embed_dim"]) and out.dtype == np.float32
    np.testing.assert_array_equal(out, a.transform(images))
    b = embedder().fit(images)
    assert b.model_fingerprint_ == a.model_fingerprint_
    np.testing.assert_array_equal(out, b.transform(images))
    other = embedder(random_state=1).fit(images)
    assert other.model_fingerprint_ != a.model_fingerprint_
    text = embedder(modality="text").fit(captions)
    assert text.transform(captions).shape == (12, CONFIG["embed_dim"])
    assert text.model_fingerprint_ == a.model_fingerprint_  # same weights, other tower
    assert not a.model_.training
    assert list(a.get_feature_names_out()[:2]) == ["clipembedder0", "clipembedder1"]


@pytest.mark.parametrize("modality", ["image", "text"])
def test_batch_size_invariance_and_normalize(scenes, modality):
    images, captions = scenes
    X = images if modality == "image" else captions
    full = embedder(modality=modality, batch_size=64).fit().transform(X)
    small = embedder(modality=modality, batch_size=5).fit().transform(X)
    np.testing.assert_allclose(small, full, rtol=1e-5, atol=1e-6)
    unit = embedder(modality=modality, normalize=True).fit().transform(X)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(unit, full / np.linalg.norm(full, axis=1, keepdims=True), rtol=1e-4, atol=1e-6)


def test_image_input_forms_agree(scenes, tmp_path):
    images, _ = scenes
    model = embedder().fit()
    reference = model.transform(images)
    paths = []
    for i, image in enumerate(images[:4]):
        path = tmp_path / f"scene{i}.png"
        Image.fromarray(image).save(path)
        paths.append(str(path))
    forms = {
        "pil": [Image.fromarray(x) for x in images[:4]],
        "list of arrays": list(images[:4]),
        "paths": paths,
        "path objects": [tmp_path / f"scene{i}.png" for i in range(4)],
        "floats": images[:4] / 255.0,
        "rgba": [Image.fromarray(np.dstack([x, np.full(x.shape[:2], 255, np.uint8)])) for x in images[:4]],
        "torch": torch.from_numpy(images[:4]),
        "flat rows": images[:4].reshape(4, -1),
    }
    for name, X in forms.items():
        np.testing.assert_allclose(model.transform(X), reference[:4], rtol=1e-5, atol=1e-6, err_msg=name)


def test_grey_images_are_repeated_to_rgb():
    grey = np.random.default_rng(0).integers(0, 256, size=(3, 32, 32), dtype=np.uint8)
    model = embedder().fit()
    rgb = np.repeat(grey[..., None], 3, axis=-1)
    expected = model.transform(rgb)
    np.testing.assert_allclose(model.transform(list(grey)), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.transform([Image.fromarray(g) for g in grey]), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.transform(grey.reshape(3, -1)), expected, rtol=1e-5, atol=1e-6)


def test_resizing_float_images_follows_open_clip():
    rng = np.random.default_rng(0)
    big = rng.integers(0, 256, size=(3, 45, 70, 3), dtype=np.uint8)
    model = embedder().fit()
    via_pil = model.transform(big)                 # open_clip's own PIL transform
    via_torch = model.transform(big / 255.0)       # batched torch resize
    scale = np.abs(via_pil).mean()
    assert np.abs(via_pil - via_torch).max() < 0.02 * scale


def test_flat_rows_with_image_shape_and_strips():
    rng = np.random.default_rng(0)
    model = embedder(image_shape=(16, 8, 3)).fit(rng.random((2, 16 * 8 * 3)))
    X = rng.random((3, 16 * 8 * 3))
    np.testing.assert_allclose(model.transform(X), model.transform(X.reshape(3, 16, 8, 3)), rtol=1e-5)
    with pytest.raises(ValueError, match="features"):
        model.transform(rng.random((3, 10)))
    strips = embedder().fit(rng.random((4, 5)))
    assert strips.n_features_in_ == 5 and strips.transform(rng.random((4, 5))).shape == (4, 8)


def test_text_inputs_and_tokenizer():
    import pandas as pd

    model = embedder(modality="text").fit()
    captions = ["a small red circle on the left", "", "word " * 100]
    out = model.transform(captions)
    assert out.shape == (3, 8) and np.isfinite(out).all()
    np.testing.assert_array_equal(model.transform(np.array(captions, dtype=object)), out)
    np.testing.assert_array_equal(model.transform(pd.Series(captions)), out)
    tokens = model._tokenizer()(captions)
    assert tokens.shape == (3, CONFIG["text_cfg"]["context_length"]) == (3, model.context_length_)
    assert tokens[2, -1] == 49407  # truncated, end-of-text kept
    with pytest.raises(ValueError, match="single string"):
        model.transform("a red circle")
    with pytest.raises(ValueError, match="strings"):
        model.transform(["a red circle", 3])
    with pytest.raises(ValueError, match="0 captions"):
        model.transform([])


def test_grey_batch_arrays_read_as_trailing_channel():
    rng = np.random.default_rng(0)
    grey = rng.integers(0, 256, size=(3, 32, 32), dtype=np.uint8)
    model = embedder().fit(grey)
    assert not hasattr(model, "n_features_in_")  # images, not the 2-D rows path
    for X in (grey, grey / 255.0, (grey / 255.0).astype(np.float32)):
        expected = model.transform(X[..., None])
        np.testing.assert_array_equal(model.transform(X), expected)
        np.testing.assert_array_equal(model.transform(torch.from_numpy(np.ascontiguousarray(X))), expected)
    np.testing.assert_allclose(model.transform(grey), model.transform(list(grey)), rtol=1e-5, atol=1e-6)
    # the whitened scorer routes the same array to its embedder
    scorer = WhitenedCLIPScorer(embedder=embedder()).fit(rng.integers(0, 256, size=(12, 32, 32), dtype=np.uint8))
    np.testing.assert_allclose(scorer.score_samples(grey), scorer.score_samples(grey[..., None]), rtol=1e-6)
    # a last axis of 1, 3 or 4 could be one (H, W, C) image: refused, unless image_shape says (H, W)
    strips = rng.integers(0, 256, size=(2, 32, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match=r"single image.*X\[\.\.\., None\]"):
        model.transform(strips)
    with pytest.raises(ValueError, match="single image"):
        embedder().fit(np.zeros((32, 32, 3), dtype=np.uint8))
    shaped = embedder(image_shape=(32, 3)).fit()
    np.testing.assert_array_equal(shaped.transform(strips), shaped.transform(strips[..., None]))


def test_bad_image_inputs():
    model = embedder().fit()
    with pytest.raises(ValueError, match="dim"):
        model.transform(np.zeros((2, 2, 32, 32, 3)))
    with pytest.raises(ValueError, match="0..255"):
        model.transform(np.full((1, 32, 32, 3), 300, dtype=np.int64))
    with pytest.raises(ValueError, match="NaN"):
        model.transform([np.full((32, 32, 3), np.nan)])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        model.transform(["/no/such/image.png"])
    with pytest.raises(ValueError, match="single string"):
        model.transform("image.png")


@pytest.mark.parametrize("params, error, match", [
    (dict(modality="audio"), ValueError, "modality"),
    (dict(precision="fp8"), ValueError, "precision"),
    (dict(batch_size=0), ValueError, "batch_size"),
    (dict(image_shape=(32, 32, 2)), ValueError, "image_shape"),
    (dict(model_config=None, model_name="hf-hub:laion/CLIP-ViT-B-32"), ValueError, "never downloads"),
    (dict(model_config=None, model_name="local-dir:/no/such/folder"), FileNotFoundError, "no folder"),
    (dict(pretrained="openai"), FileNotFoundError, "download tag"),
    (dict(pretrained="/no/such/file.pt"), FileNotFoundError, "never downloads"),
])
def test_bad_parameters(params, error, match):
    with pytest.raises(error, match=match):
        embedder(**params).fit()


def test_missing_shipped_model_says_what_to_pass(monkeypatch):
    monkeypatch.setattr(_weights, "_REGISTRY", {})
    with pytest.raises(FileNotFoundError, match="skicml pretrain tiny-clip"):
        CLIPEmbedder().fit()


def _random_model():
    torch.manual_seed(0)
    return build_clip(CONFIG).eval()


def test_local_weights_give_bit_identical_features(tmp_path, scenes):
    images, captions = scenes
    model = _random_model()
    source = embedder(pretrained=None)
    torch.save(model.state_dict(), tmp_path / "weights.pt")
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, tmp_path / "weights.safetensors")
    with torch.inference_mode():
        expected = model.encode_image(torch.stack([source.fit()._pil_preprocess(Image.fromarray(x))
                                                   for x in images])).numpy()
        expected_text = model.encode_text(open_clip.tokenizer.SimpleTokenizer(context_length=16)(captions)).numpy()
    for name in ("weights.pt", "weights.safetensors"):
        loaded = embedder(pretrained=str(tmp_path / name)).fit()
        np.testing.assert_array_equal(loaded.transform(images), expected)
        text = embedder(pretrained=str(tmp_path / name), modality="text").fit()
        np.testing.assert_array_equal(text.transform(captions), expected_text)
        assert loaded.model_info_["weights"].endswith(name)
    # a plain state dict needs an architecture
    with pytest.raises(ValueError, match="model_name"):
        CLIPEmbedder(pretrained=str(tmp_path / "weights.pt")).fit()

    # skicml's own format carries the architecture and its provenance
    path = tmp_path / "tiny.pt"
    _weights.save_weights(path, {k: v.half() for k, v in model.state_dict().items()},
                          {"model_cfg": CONFIG, "preprocess_cfg": {"size": 32}}, {"steps": 3})
    shipped = CLIPEmbedder(pretrained=str(path), device="cpu").fit()
    assert shipped.model_info_["provenance"]["steps"] == 3
    assert shipped.transform(images).shape == (12, 8)
    with pytest.raises(ValueError, match="carries its own architecture"):
        CLIPEmbedder(pretrained=str(path), model_config=CONFIG).fit()

    # open_clip's local-dir: folder
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": CONFIG, "preprocess_cfg": {}}))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, folder / "open_clip_model.safetensors")
    local = CLIPEmbedder(model_name=f"local-dir:{folder}", device="cpu").fit()
    np.testing.assert_array_equal(local.transform(images), expected)
    np.testing.assert_array_equal(
        CLIPEmbedder(model_name=f"local-dir:{folder}", modality="text", device="cpu").fit().transform(captions),
        expected_text,
    )


def test_registered_name_loads(tmp_path, monkeypatch):
    package = tmp_path / "fakeclip"
    (package / "_weights").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    digest = _weights.save_weights(package / "_weights" / "m.pt", _random_model().state_dict(),
                                   {"model_cfg": CONFIG}, {"seed": 0})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_weights, "_REGISTRY", {})
    _weights.register_weights(_embedder.DEFAULT_CLIP, "fakeclip", "_weights/m.pt", digest)
    default = CLIPEmbedder(device="cpu").fit()       # no model named: the shipped one
    assert default.model_info_["provenance"]["sha256"] == digest
    assert default.transform(np.zeros((1, 32, 32, 3), np.uint8)).shape == (1, 8)


def test_openai_torchscript_archive_is_built_with_quick_gelu(tmp_path):
    cfg = {"embed_dim": 16, "quick_gelu": True,
           "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 8},
           "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 1}}
    torch.manual_seed(0)
    model = build_clip(cfg).eval()
    mask = model.attn_mask  # OpenAI's archives have no attn_mask entry
    del model._buffers["attn_mask"]
    model.attn_mask = mask
    x, tokens = torch.randn(2, 3, 32, 32), torch.randint(0, 49407, (2, 16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.trace(model, (x, tokens), check_trace=False).save(tmp_path / "ViT-tiny.pt")
    assert _embedder._is_torchscript(tmp_path / "ViT-tiny.pt")
    loaded = CLIPEmbedder(pretrained=str(tmp_path / "ViT-tiny.pt"), device="cpu").fit()
    assert "QuickGELU" in loaded.model_info_["architecture"]
    # the same (float16-rounded, as OpenAI's loader does) weights in QuickGELU and GELU models
    images = np.random.default_rng(0).integers(0, 256, size=(3, 32, 32, 3), dtype=np.uint8)
    x = torch.stack([loaded._pil_preprocess(Image.fromarray(i)) for i in images])
    features = {}
    for quick in (True, False):
        twin = build_clip({**cfg, "quick_gelu": quick}).eval()
        twin.load_state_dict(loaded.model_.state_dict(), strict=False)
        with torch.inference_mode():
            features[quick] = twin.encode_image(x).numpy()
    out = loaded.transform(images)
    np.testing.assert_allclose(out, features[True], rtol=1e-5, atol=1e-6)
    assert np.abs(out - features[False]).max() > 1e-3
    torch.save(model.state_dict(), tmp_path / "plain.pt")
    assert not _embedder._is_torchscript(tmp_path / "plain.pt")


def test_quick_gelu_warning_for_openai_named_files():
    model = CLIPEmbedder(model_name="ViT-L-14")
    with pytest.warns(UserWarning, match="ViT-L-14-quickgelu"):
        model._warn_quick_gelu("ViT-L-14", "/models/openai/ViT-L-14.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model._warn_quick_gelu("ViT-L-14-quickgelu", "/models/openai/ViT-L-14.pt")
        model._warn_quick_gelu("ViT-L-14", "/models/laion/ViT-L-14.pt")


def test_memory_cache_never_reencodes(tmp_path, scenes, monkeypatch):
    images, _ = scenes
    calls = []
    original = CLIPEmbedder._encode

    def counting(self, kind, data):
        calls.append(kind)
        return original(self, kind, data)

    monkeypatch.setattr(CLIPEmbedder, "_encode", counting)
    cached = embedder(memory=str(tmp_path / "cache")).fit()
    first = cached.transform(images)
    np.testing.assert_array_equal(clone(cached).fit().transform(images), first)  # a refit reads the cache
    assert calls == ["array"]
    cached.transform(images[:5])
    embedder(memory=str(tmp_path / "cache"), normalize=True).fit().transform(images)
    assert calls == ["array", "array", "array"]
    # paths are keyed by modification time as well
    path = tmp_path / "a.png"
    Image.fromarray(images[0]).save(path)
    cached.transform([str(path)])
    cached.transform([str(path)])
    Image.fromarray(images[1]).save(path)
    os.utime(path, ns=(1, 1))
    cached.transform([str(path)])
    assert calls.count("list") == 2


def test_pickle_clone_and_pipeline(scenes):
    images, captions = scenes
    text = embedder(modality="text").fit()
    restored = pickle.loads(pickle.dumps(text))
    np.testing.assert_array_equal(restored.transform(captions), text.transform(captions))
    fitted = embedder().fit()
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.transform(images), fitted.transform(images))
    assert clone(fitted).get_params()["model_config"] == CONFIG
    pipe = make_pipeline(embedder(), WhiteningLikelihood(shrinkage=0.1)).fit(images)
    assert pipe.score_samples(images).shape == (12,)


def test_model_cache_is_shared_between_clones(scenes):
    a = embedder().fit()
    b = clone(a).fit()
    assert a.model_ is b.model_


def test_fp64_and_tags():
    model = embedder(precision="fp64").fit()
    assert model.transform(np.zeros((1, 32, 32, 3), np.uint8)).dtype == np.float64
    from sklearn.utils import get_tags

    assert get_tags(embedder(modality="text")).input_tags.string
    assert not get_tags(embedder(modality="text")).input_tags.two_d_array
    assert get_tags(embedder()).input_tags.two_d_array


def test_import_error_names_the_extra(monkeypatch):
    import builtins
    import sys

    real_import = builtins.__import__

    def failing(name, *args, **kwargs):
        if name == "open_clip":
            raise RuntimeError("operator torchvision::nms does not exist")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "open_clip", raising=False)
    monkeypatch.setattr(builtins, "__import__", failing)
    from skicml.clip._model import import_open_clip

    with pytest.raises(ImportError, match=r"skicml\[clip\].*torch==2.14.1 torchvision==0.29.1"):
        import_open_clip()


def test_float_images_outside_the_unit_range_are_refused_not_misread(scenes):
    images, _ = scenes
    model = embedder().fit()
    scorer = WhitenedCLIPScorer(embedder=embedder()).fit(images)
    for bad in (images.astype(np.float32), images / 127.5 - 1.0, np.full((2, 32, 32, 3), 1e30),
                list(images[:2].astype(np.float64))):
        with pytest.raises(ValueError, match=r"floats in \[0, 1\].*divide by 255"):
            model.transform(bad)
        with pytest.raises(ValueError, match=r"floats in \[0, 1\]"):
            embedder().fit(bad)
        with pytest.raises(ValueError, match=r"floats in \[0, 1\]"):
            scorer.score_samples(bad)
    # the same pictures on the [0, 1] scale still give the uint8 embeddings
    np.testing.assert_allclose(model.transform(images / 255.0), model.transform(images), rtol=1e-5, atol=1e-6)


def test_rows_are_read_like_images_uint8_as_pixels_floats_checked(scenes):
    # Issue 64: float rows of 0-255 pixel values were embedded as if they were [0, 1] intensities.
    images, _ = scenes
    rows = images.reshape(len(images), -1)
    model = embedder().fit(rows)
    np.testing.assert_allclose(model.transform(rows), model.transform(rows / 255.0), rtol=1e-5, atol=1e-6)
    for bad in (rows.astype(np.float32), rows / 127.5 - 1.0):
        with pytest.raises(ValueError, match=r"(?s)flattened images.*floats in \[0, 1\].*divide by 255.*uint8"):
            model.transform(bad)
        with pytest.raises(ValueError, match=r"floats in \[0, 1\]"):
            embedder().fit(bad)
        with pytest.raises(ValueError, match=r"floats in \[0, 1\]"):
            model.transform_patches(bad)


def test_a_data_frame_of_images_names_its_column(scenes):
    # Issue 64: a data frame of image arrays reached pandas' "setting an array element with a sequence".
    pd = pytest.importorskip("pandas")
    images, _ = scenes
    frame = pd.DataFrame({"picture": list(images[:2])})
    with pytest.raises(ValueError, match=r"column 'picture' holds images or arrays.*tolist"):
        embedder().fit(frame)
    with pytest.raises(ValueError, match=r"column 'picture' holds images or arrays"):
        embedder().fit().transform(frame)


def test_named_architecture_without_weights_is_refused(monkeypatch):
    with pytest.raises(ValueError, match=r"(?s)model_name='ViT-B-32'.*pretrained=.*random"):
        CLIPEmbedder(model_name="ViT-B-32").fit()
    with pytest.raises(ValueError, match="not an open_clip architecture"):
        CLIPEmbedder(model_name="ViT-B-99").fit()
    with pytest.raises(ValueError, match="random' needs an architecture: pass model_name"):
        CLIPEmbedder(pretrained="random").fit()
    # asked for explicitly, the named architecture is built with random weights
    built = []

    def create_model(name, pretrained=None, **kwargs):
        built.append((name, pretrained))
        return build_clip(CONFIG)

    monkeypatch.setattr(open_clip, "create_model", create_model)
    model = CLIPEmbedder(model_name="ViT-B-32", pretrained="random", random_state=0, device="cpu").fit()
    assert built == [("ViT-B-32", None)] and model.model_info_["weights"].startswith("random")
    # a custom architecture takes "random" too, the same weights as None
    explicit = embedder(pretrained="random").fit()
    assert explicit.model_fingerprint_ == embedder().fit().model_fingerprint_


@pytest.mark.parametrize("modality", ["image", "text"])
def test_verbose_shows_the_embedding_batches(scenes, capsys, modality):
    images, captions = scenes
    X = images if modality == "image" else captions
    quiet = embedder(modality=modality, batch_size=5).fit()
    capsys.readouterr()
    quiet.transform(X)
    assert capsys.readouterr().err == ""
    loud = embedder(modality=modality, batch_size=5, verbose=1).fit()
    np.testing.assert_array_equal(loud.transform(X), quiet.transform(X))
    err = capsys.readouterr().err
    assert "CLIPEmbedder" in err and "/3" in err  # 12 inputs in batches of 5
