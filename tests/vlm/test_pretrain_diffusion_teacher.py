"""``skicml pretrain tiny-diffusion-teacher`` at a tiny size: it trains, exports and records the shipped fields."""

from skicml._weights import load_weights
from skicml.vlm import TinyDiffusionTeacher
from skicml.vlm._lavender._pretrain import main

TINY = ["--scenes", "40", "--d-model", "16", "--n-layers", "1", "--n-heads", "2", "--batch-size", "4",
        "--eval-scenes", "6", "--threads", "1", "--quiet"]


def test_recipe_exports_a_loadable_teacher_with_the_shipped_provenance_fields(tmp_path, capsys):
    path = tmp_path / "teacher.pt"
    assert main(TINY + ["--steps", "2", "--eval-every", "1", "--export", str(path)]) == 0
    out = capsys.readouterr().out
    assert "step 1: pointing shape" in out and "step 2: pointing shape" in out and "sha256" in out
    provenance = load_weights(str(path))["provenance"]
    shipped = load_weights("tiny-diffusion-scenes")["provenance"]
    assert set(provenance) - {"path"} == set(shipped) - {"path"}
    assert provenance["steps"] == 2 and provenance["lr"] == 2e-3
    assert provenance["pointing_accuracy"]["extract_timesteps"] == [0, 1, 2]
    assert "t=0" in provenance["calibration_shape_color_percent"]
    teacher = TinyDiffusionTeacher(pretrained=str(path), device="cpu").fit()
    assert teacher.vocabulary_[:1] == load_weights(str(path))["config"]["vocabulary"][:1]
