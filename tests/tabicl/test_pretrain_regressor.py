"""``skicml pretrain tabicl-regressor``: the pinball objective, the recipe's run, resumption and export."""

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml import _weights
from skicml.tabicl._model_v2 import TabICLv2Model
from skicml.tabicl._pretrain_regressor import PRESETS, main, model_config, pinball_loss
from skicml.tabicl.prior import PriorConfig, TabularPrior

torch.set_num_threads(1)

RUN = ["--preset", "tiny", "--num-quantiles", "15", "--batch-size", "2", "--min-rows", "32", "--max-rows", "40",
       "--max-features", "5", "--eval-every", "0", "--eval-tables", "2", "--quiet"]


def official_pinball(quantiles, y_test):
    """The loss of tabicl 2.2.0's training step for regression_method='quantile', as written there."""
    alphas = torch.linspace(0.0, 1.0, quantiles.shape[-1] + 2)[1:-1].view(1, 1, -1)
    errors = y_test.unsqueeze(-1) - quantiles
    return torch.maximum(alphas * errors, (alphas - 1) * errors).mean()


def test_pinball_loss_is_the_official_objective_over_tables_of_each_width():
    batch = TabularPrior(PriorConfig(task="regression", max_features=6, min_rows=24, max_rows=32), seed=4).sample(6)
    n_train, widths = batch["n_train"], batch["n_features"]
    assert len(set(widths.tolist())) > 1  # several widths: the loss runs them separately
    outputs = {}

    def stub(X, y_train):  # quantiles that depend on the table, its width and the rows
        q = X.sum(-1, keepdim=True)[:, n_train:] + torch.linspace(-1, 1, 7) * (1 + X.shape[-1])
        outputs[X.shape[-1]] = q
        return q

    loss = pinball_loss(stub, batch)
    expected = sum(official_pinball(outputs[int(w)], batch["y"][rows][:, n_train:]) * len(rows)
                   for w in widths.unique()
                   for rows in [(widths == w).nonzero().squeeze(1).tolist()]) / len(widths)
    assert float(loss) == pytest.approx(float(expected), rel=1e-6)


@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.floats(-5, 5, allow_nan=False), min_size=3, max_size=30),
       shift=st.floats(0.05, 2.0))
def test_pinball_loss_prefers_the_empirical_quantiles(values, shift):
    # Constant predictions at the levels' empirical quantiles of y minimise the loss; moving them loses.
    y = torch.tensor(values, dtype=torch.float64).view(1, -1)
    levels = torch.linspace(0.0, 1.0, 9 + 2, dtype=torch.float64)[1:-1]
    best = torch.quantile(y[0], levels, interpolation="lower").view(1, 1, -1).expand(1, y.shape[1], -1)
    batch = {"X": torch.zeros(1, y.shape[1] + 1, 1), "y": torch.cat([torch.zeros(1, 1), y.float()], 1),
             "n_features": torch.ones(1, dtype=torch.long), "n_train": 1}
    loss = [float(pinball_loss(lambda X, y_train, q=q: q, batch)) for q in (best, best + shift, best - shift)]
    assert loss[0] <= loss[1] + 1e-6 and loss[0] <= loss[2] + 1e-6


def test_recipe_exports_a_regression_model_with_provenance(tmp_path):
    checkpoint, out = tmp_path / "run.ckpt", tmp_path / "model.pt"
    assert main(RUN + ["--steps", "3", "--checkpoint", str(checkpoint), "--export", str(out)]) == 0
    payload = _weights.load_weights(out)
    provenance, config = payload["provenance"], payload["config"]
    assert provenance["steps"] == 3 and provenance["preset"] == "tiny" and provenance["seed"] == 0
    assert provenance["recipe"].startswith("skicml pretrain tabicl-regressor --preset tiny")
    prior = json.loads(provenance["prior"])
    assert prior["task"] == "regression" and prior["max_features"] == 5 and prior["graph_scm_prob"] == 0.8
    for key in ("heldout_pinball", "heldout_marginal_pinball", "diabetes_r2", "ridge_diabetes_r2"):
        assert isinstance(provenance[key], float), key
    assert config["max_classes"] == 0 and config["num_quantiles"] == 15 and config["bias_free_ln"] is True
    model = TabICLv2Model(**config)
    model.load_state_dict(payload["state_dict"])
    history = torch.load(checkpoint, weights_only=True)["history"]
    assert history["step"] == 3 and len(history["loss"]) == 3 and history["items"] == 6


def test_an_interrupted_run_resumes_to_the_same_weights(tmp_path):
    straight, interrupted = tmp_path / "straight.ckpt", tmp_path / "interrupted.ckpt"
    main(RUN + ["--steps", "3", "--checkpoint", str(straight)])
    main(RUN + ["--steps", "3", "--checkpoint", str(interrupted), "--max-minutes", "0"])  # stops after step 1
    assert torch.load(interrupted, weights_only=True)["history"]["step"] == 1
    main(RUN + ["--steps", "3", "--checkpoint", str(interrupted)])
    a, b = (torch.load(path, weights_only=True) for path in (straight, interrupted))
    assert b["history"]["step"] == 3 and a["history"]["loss"] == b["history"]["loss"]
    for name, weights in a["model"].items():
        torch.testing.assert_close(b["model"][name], weights, rtol=0, atol=0, msg=name)


def test_config_overrides_and_their_errors(capsys):
    config = model_config("small", 99, ["icl_num_blocks=4", "col_ssmax=none", "zero_init=False"])
    assert config["icl_num_blocks"] == 4 and config["col_ssmax"] == "none" and config["zero_init"] is False
    assert config["embed_dim"] == PRESETS["small"]["embed_dim"] and config["max_classes"] == 0
    for bad, message in ((["--config", "max_classes=3"], "--config takes KEY=VALUE"),
                         (["--config", "widht=3"], "got 'widht=3'"), (["--config", "nonsense"], "KEY=VALUE"),
                         (["--eval-tables", "0"], "--eval-tables must be at least 1")):
        with pytest.raises(SystemExit):
            main(RUN + ["--steps", "0"] + bad)
        assert message in capsys.readouterr().err


def test_discovery_finds_the_second_recipe_of_a_family(tmp_path):
    from skicml.utils.discovery import all_pretrain_recipes

    assert all_pretrain_recipes()["tabicl-regressor"] == "skicml.tabicl._pretrain_regressor:main"
    package = tmp_path / "pkg"
    (package / "fam").mkdir(parents=True)
    for folder in (package, package / "fam"):
        (folder / "__init__.py").write_text("")
    (package / "fam" / "_pretrain.py").write_text('RECIPE_NAME = "fam"\n')
    (package / "fam" / "_pretrain_other.py").write_text('RECIPE_NAME = "fam-other"\n')
    (package / "fam" / "_pretrainer.py").write_text('RECIPE_NAME = "not-a-recipe"\n')
    assert all_pretrain_recipes(package, "pkg") == {"fam": "pkg.fam._pretrain:main",
                                                   "fam-other": "pkg.fam._pretrain_other:main"}
    (package / "fam" / "_pretrain_other.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="_pretrain_other.py"):
        all_pretrain_recipes(package, "pkg")
