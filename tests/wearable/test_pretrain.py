"""``skicml pretrain wearable``: export, provenance and resume."""

import numpy as np

from skicml._weights import load_weights
from skicml.datasets import make_wearable_cohort
from skicml.wearable import WearableEncoder
from skicml.wearable._pretrain import main

ARGS = ["--people", "12", "--weeks", "2", "--d-model", "16", "--n-layers", "1", "--batch-size", "16",
        "--eval-people", "60", "--threads", "1", "--quiet"]


def test_recipe_exports_a_loadable_encoder_with_provenance(tmp_path, capsys):
    checkpoint, first, export = tmp_path / "run", tmp_path / "first.pt", tmp_path / "encoder.pt"
    # --day-context on both calls: the resumed network must match the checkpoint's.
    assert main(ARGS + ["--epochs", "1", "--day-context", "--checkpoint-dir", str(checkpoint),
                        "--export", str(first)]) == 0
    # A second call resumes the run: its first epoch is the one already
    # trained (a fresh run with another seed would have another loss).
    assert main(ARGS + ["--epochs", "2", "--seed", "1", "--day-context", "--checkpoint-dir", str(checkpoint),
                        "--export", str(export)]) == 0
    out = capsys.readouterr().out
    assert "score_summary_features" in out and "sha256" in out

    payload = load_weights(str(export))
    provenance = payload["provenance"]
    assert provenance["epochs"] == 2 and len(provenance["train_loss"]) == 2
    assert provenance["train_loss"][0] == load_weights(str(first))["provenance"]["train_loss"][0]
    assert provenance["cohort"]["n_people"] == 12
    assert set(provenance["probe_scores"]["task"]) >= {"age_group", "infection", "sleep_duration"}
    assert payload["config"]["channel_names"][0] == "sleep_asleep_min"
    assert payload["config"]["day_context"] is True

    X, *_ = make_wearable_cohort(n_people=3, n_weeks=1, random_state=5)
    encoder = WearableEncoder(pretrained=str(export)).fit(X)
    assert encoder.transform(X).shape == (3, 16)
    assert np.isfinite(encoder.transform(X)).all()
