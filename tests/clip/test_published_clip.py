"""open_clip's (model_name, pretrained tag) pairs, resolved through open_clip's own table, from an offline cache.

A real tag names a real architecture (ViT-B-32 is 151 M parameters), too
large for the test suite; so open_clip's tables get one tiny architecture and
one tag of it, in the form of its own entries (a ``hf_hub`` repo with open_clip's
default file name, the tag's mean and std), and the hub cache holds random
weights of it as ``open_clip_model.safetensors``, the file open_clip prefers.
"""

import numpy as np
import pytest

open_clip = pytest.importorskip("open_clip", exc_type=ImportError)

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from skicml.clip import CLIPEmbedder, WhitenedCLIPScorer  # noqa: E402
from skicml.clip._model import build_clip  # noqa: E402
from skicml.datasets import make_shape_scenes  # noqa: E402
from skicml.utils._test_common import CLIP_TEST_CONFIG  # noqa: E402

ARCH, TAG, REPO = "skicml-test-tiny", "fake_s1k", "skicml-test/CLIP-tiny-fake_s1k"
MEAN, STD = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)


@pytest.fixture
def tiny_tag(monkeypatch):
    monkeypatch.setitem(open_clip.factory._MODEL_CONFIGS, ARCH, dict(CLIP_TEST_CONFIG))
    monkeypatch.setitem(open_clip.pretrained._PRETRAINED, ARCH,
                        {TAG: open_clip.pretrained._pcfg(hf_hub=f"{REPO}/", mean=MEAN, std=STD)})
    torch.manual_seed(0)
    return build_clip(CLIP_TEST_CONFIG).state_dict()


def test_a_tag_loads_from_the_cache_with_its_preprocessing(hub_cache, tiny_tag):
    path = hub_cache.add(REPO, "open_clip_model.safetensors",
                         lambda p: save_file({k: v.contiguous() for k, v in tiny_tag.items()}, str(p)))
    model = CLIPEmbedder(model_name=ARCH, pretrained=TAG, device="cpu").fit()
    for key, value in model.model_.state_dict().items():
        torch.testing.assert_close(value, tiny_tag[key], rtol=0, atol=0)
    assert tuple(model.preprocess_cfg_["mean"]) == MEAN and tuple(model.preprocess_cfg_["std"]) == STD
    assert model.model_info_["published"] == f"{ARCH}:{TAG}" and model.model_info_["path"] == str(path)
    images, captions, _ = make_shape_scenes(12, random_state=0)
    # the same weights by path give the same model: only the tag's preprocessing differs
    by_path = CLIPEmbedder(model_name=ARCH, pretrained=str(path), device="cpu").fit()
    assert by_path.model_fingerprint_ == model.model_fingerprint_
    texts = CLIPEmbedder(model_name=ARCH, pretrained=TAG, modality="text", device="cpu")
    np.testing.assert_allclose(texts.fit_transform(list(captions)),
                               CLIPEmbedder(model_name=ARCH, pretrained=str(path), modality="text",
                                            device="cpu").fit_transform(list(captions)), rtol=0, atol=1e-6)
    # the W-CLIP scorer and ViLAMP's video encoder take such an embedder as it is
    scorer = WhitenedCLIPScorer(embedder=CLIPEmbedder(model_name=ARCH, pretrained=TAG, device="cpu"))
    assert scorer.fit(images).score_samples(images).shape == (12,)
    from skicml.video import CLIPVideoEncoder

    clips = [(np.stack(images[:5]), "a red circle"), (np.stack(images[5:12]), "a blue square")]
    video = CLIPVideoEncoder(embedder=CLIPEmbedder(model_name=ARCH, pretrained=TAG, device="cpu")).fit(clips)
    assert video.image_embedder_.model_fingerprint_ == model.model_fingerprint_
    np.testing.assert_allclose(video.transform_videos(clips)[0].frames, model.transform(np.stack(images[:5])),
                               rtol=0, atol=1e-5)


def test_an_empty_cache_names_the_download_command(hub_cache, tiny_tag):
    with pytest.raises(FileNotFoundError, match=rf"not in the local cache.*skicml download {ARCH}:{TAG}"):
        CLIPEmbedder(model_name=ARCH, pretrained=TAG, device="cpu").fit()
    with pytest.raises(FileNotFoundError, match="skicml download ViT-B-32:laion2b_s34b_b79k"):
        CLIPEmbedder(model_name="ViT-B-32", pretrained="laion2b_s34b_b79k", device="cpu").fit()


def test_a_tag_without_its_architecture_says_what_to_add():
    with pytest.raises(FileNotFoundError, match=r"'laion2b_s34b_b79k' is an open_clip download tag; pass model_name"):
        CLIPEmbedder(pretrained="laion2b_s34b_b79k", device="cpu").fit()
