"""``skicml pretrain graphgpt`` at a tiny size: it trains, exports and records the shipped file's provenance fields."""

import pytest

pytest.importorskip("rdkit")

from skicml._weights import load_weights  # noqa: E402
from skicml.graph._graphgpt._pretrain import main  # noqa: E402

TINY = ["--molecules", "50", "--hidden-size", "16", "--num-layers", "1", "--head-dim", "8", "--batch-size", "4",
        "--eval-molecules", "20", "--threads", "1", "--quiet"]


def test_recipe_exports_a_backbone_with_the_shipped_provenance_fields(tmp_path, capsys):
    path = tmp_path / "graphgpt.pt"
    assert main(TINY + ["--steps", "2", "--eval-every", "1", "--export", str(path)]) == 0
    out = capsys.readouterr().out
    assert "step 1: probe gap MAE" in out and "step 2: probe gap MAE" in out and "sha256" in out
    provenance = load_weights(str(path))["provenance"]
    shipped = load_weights("graphgpt-qm9-small")["provenance"]
    assert set(provenance) - {"path"} == set(shipped) - {"path"}
    assert provenance["steps"] == 2 and provenance["n_molecules"] == 50 and provenance["threads"] == 1
    assert [step for step, _ in provenance["probe_gap_mae_ev"]] == [1, 2]
    assert provenance["recipe"].startswith("skicml pretrain graphgpt --molecules 50")
    config = load_weights(str(path))["config"]
    assert config["backbone"]["hidden_size"] == 16 and config["tokenizer"] is not None
