"""Tests of ``skicml pretrain tiny-clip`` at a tiny size (the real run is the lead's)."""

import numpy as np
import pytest

open_clip = pytest.importorskip("open_clip")

import torch  # noqa: E402

from skicml import _weights, cli  # noqa: E402
from skicml.clip import CLIPEmbedder  # noqa: E402
from skicml.clip import _pretrain  # noqa: E402
from skicml.clip._model import TINY_CLIP_CONFIG, build_clip  # noqa: E402

SMALL = ["--batch-size", "8", "--embed-dim", "8", "--vision-width", "32", "--vision-layers", "1",
         "--patch-size", "8", "--text-width", "32", "--text-layers", "1", "--context-length", "20",
         "--eval-scenes", "16", "--evidence-fit", "60", "--evidence-test", "40", "--quiet", "--threads", "1"]


def test_recipe_is_registered():
    assert cli.PRETRAIN_RECIPES["tiny-clip"] == "skicml.clip._pretrain:main"


def test_shipped_architecture_fits_the_budget():
    model = build_clip(TINY_CLIP_CONFIG)
    n = sum(p.numel() for p in model.parameters())
    assert 2 * n / 1e6 <= _pretrain.MAX_MEGABYTES
    args = _pretrain.build_parser().parse_args([])
    assert _pretrain.model_config(args) == TINY_CLIP_CONFIG


def test_stream_is_deterministic_and_resumable():
    tokenizer = open_clip.tokenizer.SimpleTokenizer(context_length=20)
    cfg = {"size": (32, 32), "mean": (0.5,) * 3, "std": (0.25,) * 3, "interpolation": "bicubic",
           "resize_mode": "shortest"}
    a = _pretrain.ShapeCaptionStream(4, 0, tokenizer, cfg, {})
    first = [a.sample() for _ in range(3)]
    b = _pretrain.ShapeCaptionStream(4, 0, tokenizer, cfg, {})
    b.load_state_dict({"index": 2})
    images, tokens = b.sample()
    torch.testing.assert_close(images, first[2][0])
    torch.testing.assert_close(tokens, first[2][1])
    assert a.state_dict() == {"index": 3}
    assert not torch.equal(first[0][0], first[1][0])


def test_recipe_trains_exports_and_loads(tmp_path, capsys):
    path = tmp_path / "tiny.pt"
    assert _pretrain.main(["--steps", "2", "--eval-every", "1", "--export", str(path), *SMALL]) == 0
    out = capsys.readouterr().out
    assert 'register_weights("tiny-clip-shapes"' in out
    payload = _weights.load_weights(path)
    provenance = payload["provenance"]
    assert provenance["steps"] == 2 and provenance["seed"] == 0 and provenance["stored_dtype"] == "float16"
    assert provenance["recipe"].startswith("skicml pretrain tiny-clip --steps 2")
    assert provenance["data"]["generator"] == "skicml.datasets.make_shape_scenes"
    assert provenance["sha256"] in out
    evidence = provenance["wclip_evidence"]
    assert [row["severity"] for row in evidence["corruption"]["blur"]] == [1, 2, 3, 4, 5]
    assert set(evidence["captions"]) >= {"scramble", "mismatch", "drop_attributes", "unseen_words"}
    assert set(evidence["pairs"]) == {"matched_mean_ll", "mismatched_mean_ll", "auroc"}
    assert {"whitened_standard", "raw_standard"} <= set(evidence["normality"])
    assert provenance["data"]["textures"] == ["plain", "striped"]
    assert all(v.dtype == torch.float16 for v in payload["state_dict"].values() if v.is_floating_point())
    assert payload["config"]["model_cfg"]["embed_dim"] == 8
    embedder = CLIPEmbedder(pretrained=str(path), device="cpu").fit()
    assert embedder.transform(np.zeros((2, 32, 32, 3), np.uint8)).shape == (2, 8)
    assert embedder.model_info_["provenance"]["steps"] == 2


def test_interrupted_run_resumes_exactly(tmp_path):
    straight = tmp_path / "straight.pt"
    _pretrain.main(["--steps", "3", "--eval-every", "0", "--export", str(straight), *SMALL])
    checkpoint = tmp_path / "run.ckpt"
    resumed = tmp_path / "resumed.pt"
    common = ["--steps", "3", "--eval-every", "0", "--checkpoint", str(checkpoint), "--export", str(resumed), *SMALL]
    _pretrain.main(common + ["--max-minutes", "0"])      # stops after one step
    assert not resumed.exists()
    _pretrain.main(common)
    a, b = _weights.load_weights(straight)["state_dict"], _weights.load_weights(resumed)["state_dict"]
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)


def test_needle_frames_fine_tune_resumes_exports_and_reads_videos(tmp_path):
    """The ViLAMP recipe end to end: --data needle-frames --init-from, stopped and resumed, exported, read."""
    from skicml.datasets import make_needle_videos
    from skicml.video import CLIPVideoEncoder

    start = tmp_path / "shapes.ckpt"  # a small shapes model, then fine-tuned from its checkpoint
    _pretrain.main(["--steps", "1", "--eval-every", "0", "--checkpoint", str(start), *SMALL])
    needle = ["--data", "needle-frames", "--init-from", str(start), "--lr", "3e-4", "--eval-every", "2", *SMALL]
    straight = tmp_path / "straight.pt"
    _pretrain.main(["--steps", "3", "--export", str(straight), *needle])
    checkpoint, resumed = tmp_path / "needle.ckpt", tmp_path / "needle.pt"
    common = ["--steps", "3", "--checkpoint", str(checkpoint), "--export", str(resumed), *needle]
    _pretrain.main(common + ["--max-minutes", "0"])  # stops after one step
    assert not resumed.exists()
    _pretrain.main(common)
    a, b = _weights.load_weights(straight), _weights.load_weights(resumed)
    for key in a["state_dict"]:
        torch.testing.assert_close(a["state_dict"][key], b["state_dict"][key], rtol=0, atol=0)
    provenance = b["provenance"]
    assert provenance["steps"] == 3 and provenance["init_from"] == str(start)
    assert provenance["data"]["generator"].startswith("skicml.datasets.make_needle_videos")
    assert "wclip_evidence" not in provenance and b["config"]["name"] == "tiny-clip-needle-frames"
    assert [m["step"] for m in provenance["heldout"]] == [2, 3]
    # A finished checkpoint resumed with more steps would train on a spliced schedule (lr 0, then another
    # schedule's tail): refused, naming the option.
    with pytest.raises(ValueError, match=r"--steps 3 \(now 5\)"):
        _pretrain.main(["--steps", "5", "--checkpoint", str(checkpoint), *needle])
    with pytest.raises(ValueError, match="--data 'needle-frames' \\(now 'shapes'\\)"):
        _pretrain.main(["--steps", "3", "--checkpoint", str(checkpoint), "--eval-every", "0", *SMALL])
    # The benchmark's --clip path: the exported file read by CLIPVideoEncoder through CLIPEmbedder.
    data = make_needle_videos(2, n_frames=20, n_scenes=2, n_classes=3, random_state=0)
    encoder = CLIPVideoEncoder(CLIPEmbedder(pretrained=str(resumed), device="cpu"), n_frames=20)
    videos = encoder.fit(list(zip(data.videos, data.query_prompts))).transform_videos(
        list(zip(data.videos, data.query_prompts)))
    assert videos[0].frames.shape == (20, 8) and videos[0].patches.shape == (20, 16, 8)
    assert encoder.image_embedder_.model_info_["provenance"]["init_from"] == str(start)
