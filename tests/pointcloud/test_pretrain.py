import torch

from skicml.datasets import make_point_clouds
from skicml.pointcloud import GAPromptClassifier
from skicml.pointcloud._pretrain import main

TINY = ["--batch-size", "4", "--n-points", "64", "--n-groups", "8", "--group-size", "8", "--trans-dim", "16",
        "--depth", "1", "--heads", "2", "--decoder-depth", "1", "--probe-clouds", "40", "--quiet"]


def test_recipe_resumes_exactly_and_exports_a_loadable_backbone(tmp_path, capsys):
    # Two steps, then two more from the checkpoint, equal four in one go.
    main(["--steps", "4", "--max-minutes", "0", "--checkpoint", str(tmp_path / "run.pt"), *TINY])
    assert "run the same command again" in capsys.readouterr().out
    main(["--steps", "4", "--checkpoint", str(tmp_path / "run.pt"), "--export", str(tmp_path / "a.pt"), *TINY])
    main(["--steps", "4", "--export", str(tmp_path / "b.pt"), *TINY])
    out = capsys.readouterr().out
    assert "linear probe hardest: pretrained" in out
    first = torch.load(tmp_path / "a.pt", weights_only=True)
    second = torch.load(tmp_path / "b.pt", weights_only=True)
    for key, value in first["state_dict"].items():
        torch.testing.assert_close(value, second["state_dict"][key], rtol=0, atol=0)
    provenance = second["provenance"]
    assert provenance["steps"] == 4 and provenance["recipe"].startswith("skicml pretrain pointcloud")
    assert set(provenance["linear_probe"]) == {"pretrained", "random_weights"}

    data = make_point_clouds(30, n_points=64, classes=["sphere", "cube", "torus"], random_state=0)
    model = GAPromptClassifier(pretrained=str(tmp_path / "b.pt"), n_points=64, n_groups=8, group_size=8,
                               max_epochs=1, validation_fraction=None, random_state=0, device="cpu")
    model.fit(data.points, data.target)
    loaded = model.module_.backbone.state_dict()
    for key, value in second["state_dict"].items():
        torch.testing.assert_close(loaded[key], value.to(loaded[key].dtype))
