"""``skicml pretrain tiny-vlm`` at a tiny size: it trains, resumes, exports and records the shipped fields."""

from skicml._weights import load_weights
from skicml.vlm._pretrain import main
from skicml.vlm._pretrained import load_tiny_vlm

TINY = ["--scenes", "40", "--hidden-size", "16", "--num-layers", "1", "--head-dim", "8", "--batch-size", "4",
        "--eval-scenes", "5", "--threads", "1", "--quiet"]


def test_recipe_exports_a_loadable_model_with_the_shipped_provenance_fields(tmp_path, capsys):
    checkpoint, path = str(tmp_path / "run.ckpt"), tmp_path / "tiny_vlm.pt"
    common = TINY + ["--steps", "2", "--eval-every", "1", "--checkpoint", checkpoint, "--export", str(path)]
    assert main(common + ["--max-minutes", "0"]) == 0
    assert "stopped at step 1 of 2" in capsys.readouterr().out and not path.exists()
    assert main(common) == 0
    out = capsys.readouterr().out
    assert "step 1: chair_s" in out and "step 2: chair_s" in out and "unbiased CHAIR" in out
    provenance = load_weights(str(path))["provenance"]
    shipped = load_weights("tiny-vlm-scenes")["provenance"]
    assert set(provenance) - {"path"} == set(shipped) - {"path"}
    assert provenance["steps"] == 2 and provenance["seed"] == 0 and provenance["batch_size"] == 4
    assert set(provenance["chair_unbiased_500"]) >= {"chair_s", "chair_i"}
    model = load_tiny_vlm(str(path))
    assert model.config["hidden_size"] == 16
