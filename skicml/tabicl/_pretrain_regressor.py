"""``skicml pretrain tabicl-regressor``: pretrain a TabICLv2 regression network on the synthetic prior.

The recipe behind :class:`~skicml.tabicl.TabICLRegressor`'s default model::

    skicml pretrain tabicl-regressor --preset small --steps 12000 --checkpoint reg.ckpt
    skicml pretrain tabicl-regressor --checkpoint reg.ckpt --export model.pt   # shippable file

A :class:`~skicml.tabicl.TabICLv2Model` with the quantile head
(``max_classes=0``) learns from the regression tables of
``PriorConfig(task="regression")`` (TabICLv2's random-DAG SCMs beside the
MLP- and tree-SCMs; continuous, standardised targets) with TabICLv2's
objective, the pinball loss of the test rows averaged over the
``num_quantiles`` levels ``linspace(0, 1, Q + 2)[1:-1]`` (``tabicl/train``,
``regression_method="quantile"``). Every ``--eval-every`` steps it reports
the pinball loss on a held-out synthetic set (the same tables for every run,
beside the loss of predicting each table's training-target quantiles, which
ignores the features) and the R^2 of the predicted mean on scikit-learn's
diabetes table. Resumable checkpoints, warm start, DDP and the export with
provenance are the classification recipe's (:mod:`skicml.tabicl._pretrain`).

Deviations from the official training: AdamW with a cosine schedule (the
shared step loop) instead of Muon; the tables of each width run on their own
columns rather than zero-padded to the prior's width (what the network sees
at inference).
"""

from __future__ import annotations

import argparse
import ast
import inspect

import numpy as np
import torch

from ._model_v2 import TabICLv2Model
from ._pretrain import add_recipe_options, loss_by_width, run_prior_recipe
from ._quantiles import QuantileDistribution, quantile_levels
from .prior import PriorConfig, TabularPrior

__all__ = ["PRESETS", "main", "pinball_loss", "real_table_scores"]

#: ``skicml pretrain tabicl-regressor`` (found by :func:`skicml.utils.discovery.all_pretrain_recipes`).
RECIPE_NAME = "tabicl-regressor"

#: Network sizes (TabICLv2Model keywords beside ``max_classes=0``); ``small`` is the estimator's
#: random-weight architecture, ``paper`` the official defaults. Layer norms are bias-free, as in
#: the official regression checkpoint.
PRESETS = {
    "tiny": dict(embed_dim=16, col_num_blocks=1, col_nhead=2, col_num_inds=8, row_num_blocks=1, row_nhead=2,
                 row_num_cls=2, icl_num_blocks=1, icl_nhead=2),
    "small": dict(embed_dim=32, col_num_blocks=1, col_nhead=4, col_num_inds=16, row_num_blocks=1, row_nhead=4,
                  row_num_cls=4, icl_num_blocks=3, icl_nhead=4),
    "medium": dict(embed_dim=32, col_num_blocks=2, col_nhead=4, col_num_inds=16, row_num_blocks=2, row_nhead=4,
                   row_num_cls=4, icl_num_blocks=4, icl_nhead=4),
    "base": dict(embed_dim=64, col_num_blocks=2, col_nhead=4, col_num_inds=32, row_num_blocks=2, row_nhead=4,
                 row_num_cls=4, icl_num_blocks=6, icl_nhead=4),
    "paper": dict(),
}

#: Seed of the held-out synthetic tables: the same for every run, apart from any training stream.
HELD_OUT_SEED = 999_999


def _summed_pinball(quantiles, y_test):
    """Pinball loss summed over rows, averaged over the quantile levels."""
    quantiles = quantiles.float()
    levels = quantile_levels(quantiles.shape[-1], device=quantiles.device)
    errors = y_test.unsqueeze(-1).float() - quantiles
    return torch.maximum(levels * errors, (levels - 1) * errors).sum() / quantiles.shape[-1]


def pinball_loss(model, batch):
    """Mean pinball loss of a batch's test rows over the model's quantile levels (TabICLv2's objective).

    ``mean over tables, test rows and levels a of max(a * e, (a - 1) * e)``
    with ``e = y - q_a``, the quantile levels read from the output width.
    """
    y = batch["y"]
    return loss_by_width(model, batch, _summed_pinball) / (y.shape[0] * (y.shape[1] - batch["n_train"]))


class HeldOutTables:
    """A fixed set of synthetic tables the pinball loss is tracked on (drawn on first use).

    Parameters
    ----------
    prior_config : PriorConfig
    n_tables : int
    batch_size : int
        Tables per forward pass (each batch has its own row count).
    """

    def __init__(self, prior_config, n_tables, batch_size=16, seed=HELD_OUT_SEED):
        self.prior_config = prior_config
        self.n_tables = n_tables
        self.batch_size = batch_size
        self.seed = seed
        self._batches = None
        self._marginal = {}

    def batches(self):
        if self._batches is None:
            prior = TabularPrior(self.prior_config, seed=self.seed)
            sizes = [self.batch_size] * (self.n_tables // self.batch_size)
            if self.n_tables % self.batch_size:
                sizes.append(self.n_tables % self.batch_size)
            self._batches = [prior.sample(size) for size in sizes]
        return self._batches

    @staticmethod
    def _weight(batch):
        return batch["y"].shape[0] * (batch["y"].shape[1] - batch["n_train"])

    def marginal_pinball(self, num_quantiles):
        """Pinball loss of each table's training-target quantiles (a model that ignores the features)."""
        if num_quantiles in self._marginal:
            return self._marginal[num_quantiles]
        total = count = 0.0
        levels = quantile_levels(num_quantiles, dtype=torch.float64)
        for batch in self.batches():
            n_train, y = batch["n_train"], batch["y"].double()
            q = torch.quantile(y[:, :n_train], levels, dim=1).T  # (B, Q)
            total += float(_summed_pinball(q.unsqueeze(1).expand(-1, y.shape[1] - n_train, -1), y[:, n_train:]))
            count += self._weight(batch)
        self._marginal[num_quantiles] = total / count
        return total / count

    def __call__(self, model):
        """``{"heldout_pinball", "heldout_marginal_pinball"}`` of ``model`` (eval mode, no gradient)."""
        device = next(model.parameters()).device
        total = count = 0.0
        with torch.no_grad():
            for batch in self.batches():
                on_device = {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
                weight = self._weight(batch)
                total += float(pinball_loss(model, on_device)) * weight
                count += weight
        return {"heldout_pinball": total / count,
                "heldout_marginal_pinball": self.marginal_pinball(model.num_quantiles)}


def real_table_scores(model, max_train=256, seeds=(0, 1, 2), with_baseline=False):
    """R^2 and pinball loss of one plain model member on scikit-learn's diabetes table.

    Features and target are standardised with training statistics; the mean
    of the predicted distribution is scored on the target's scale, the
    pinball loss on the standardised one. No ensembling, so this tracks the
    network itself; ``with_baseline`` adds a scaled ``RidgeCV``'s R^2.
    """
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import RidgeCV
    from sklearn.metrics import r2_score
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = load_diabetes(return_X_y=True)
    device = next(model.parameters()).device
    r2, pinball, baseline = [], [], []
    for seed in seeds:
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, train_size=min(max_train, int(0.7 * len(y))),
                                                  random_state=seed)
        mean, std = X_tr.mean(0), X_tr.std(0) + 1e-6
        table = np.clip((np.vstack([X_tr, X_te]) - mean) / std, -100, 100)
        y_mean, y_std = y_tr.mean(), y_tr.std() + 1e-12
        X_t = torch.tensor(table, dtype=torch.float32, device=device).unsqueeze(0)
        y_t = torch.tensor((y_tr - y_mean) / y_std, dtype=torch.float32, device=device).unsqueeze(0)
        with torch.no_grad():
            quantiles = model.predict_quantiles(X_t, y_t).double()
        predicted = QuantileDistribution(quantiles).mean()[0].cpu().numpy() * y_std + y_mean
        r2.append(r2_score(y_te, predicted))
        target = torch.tensor((y_te - y_mean) / y_std, dtype=torch.float64, device=device)
        pinball.append(float(_summed_pinball(quantiles[0], target)) / len(y_te))
        if with_baseline:
            ridge = make_pipeline(StandardScaler(), RidgeCV()).fit(X_tr, y_tr)
            baseline.append(r2_score(y_te, ridge.predict(X_te)))
    scores = {"diabetes_r2": float(np.mean(r2)), "diabetes_pinball": float(np.mean(pinball))}
    if with_baseline:
        scores["ridge_diabetes_r2"] = float(np.mean(baseline))
    return scores


def model_config(preset, num_quantiles, overrides=()):
    """TabICLv2Model keywords of a preset with ``KEY=VALUE`` overrides (values read as Python literals)."""
    config = dict(PRESETS[preset], max_classes=0, num_quantiles=num_quantiles, bias_free_ln=True)
    allowed = set(inspect.signature(TabICLv2Model).parameters) - {"max_classes"}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or key not in allowed:
            raise ValueError(f"--config takes KEY=VALUE with KEY a TabICLv2Model argument other than max_classes "
                             f"({', '.join(sorted(allowed))}); got {item!r}.")
        try:
            config[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            config[key] = value  # a plain string, e.g. col_ssmax=none
    return config


def transfer_matching_weights(model, state):
    """Start ``model`` from every tensor of ``state`` with its name and shape; the rest keeps its initialisation.

    This is how the regression network starts from the shipped v1
    classifier (``--init-from`` its weights file): with the classifier's
    column stage (``col_affine=True``, no feature groups, no scalable
    softmax, layer norms with bias) the column, row and in-context blocks
    carry over, and only the target encoders and the quantile decoder's last
    layer are new. The column stage's target encoder starts at zero, so the
    warm-started network computes the classifier's row vectors exactly until
    training moves it.

    Returns
    -------
    dict
        ``"loaded"`` and ``"fresh"``: the parameter names of each kind.
    """
    own = model.state_dict()
    loaded = {key: value for key, value in state.items() if key in own and own[key].shape == value.shape}
    if not loaded:
        raise ValueError("No tensor of the given weights matches the network by name and shape: nothing to start "
                         "from; check --preset and --config against the weights' architecture.")
    model.load_state_dict(loaded, strict=False)
    encoder = getattr(model.col_embedder, "y_encoder", None)
    if encoder is not None and not any(key.startswith("col_embedder.y_encoder.") for key in loaded):
        with torch.no_grad():
            encoder.weight.zero_()
            encoder.bias.zero_()
    fresh = sorted(set(own) - set(loaded))
    print(f"warm start: {len(loaded)} tensors ({sum(v.numel() for v in loaded.values()):,} values) loaded, "
          f"{len(fresh)} fresh: {', '.join(fresh[:8])}{' ...' if len(fresh) > 8 else ''}", flush=True)
    return {"loaded": sorted(loaded), "fresh": fresh}


def build_parser():
    parser = argparse.ArgumentParser(prog="skicml pretrain tabicl-regressor", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small")
    parser.add_argument("--num-quantiles", type=int, default=999, help="quantiles the head predicts")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="override a TabICLv2Model argument of the preset (repeatable), e.g. icl_num_blocks=4")
    parser.add_argument("--graph-scm-prob", type=float, default=None,
                        help="share of random-DAG SCM tables (default: the regression prior's)")
    parser.add_argument("--categorical-prob", type=float, default=PriorConfig.categorical_prob,
                        help="share of MLP-/tree-SCM tables in which some columns become categorical codes")
    parser.add_argument("--eval-tables", type=int, default=64, help="tables of the held-out synthetic set")
    return add_recipe_options(parser, checkpoint="tabicl_regressor_pretrain.ckpt")


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.eval_tables < 1:
        parser.error(f"--eval-tables must be at least 1, got {args.eval_tables}")
    try:
        config = model_config(args.preset, args.num_quantiles, args.config)
    except ValueError as error:
        parser.error(str(error))
    prior_config = PriorConfig(task="regression", max_features=args.max_features, min_rows=args.min_rows,
                               max_rows=args.max_rows, graph_scm_prob=args.graph_scm_prob,
                               categorical_prob=args.categorical_prob)
    held_out = HeldOutTables(prior_config, args.eval_tables, batch_size=args.batch_size)
    run_prior_recipe(
        args, argv, RECIPE_NAME, lambda run: TabICLv2Model(**config), prior_config, pinball_loss,
        evaluate=lambda model: {**held_out(model), **real_table_scores(model)},
        final_scores=lambda model: {**held_out(model), **real_table_scores(model, with_baseline=True)},
        warm_start=transfer_matching_weights,
    )
    return 0

