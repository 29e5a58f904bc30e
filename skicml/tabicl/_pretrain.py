"""``skicml pretrain tabicl``: pretrain a TabICL network on the synthetic prior.

The recipe behind the model shipped in ``skicml/tabicl/_weights/``::

    skicml pretrain tabicl --preset small --steps 12000 --checkpoint run.ckpt
    skicml pretrain tabicl --checkpoint run.ckpt --export model.pt   # shippable file

Training is resumable to the step (``--checkpoint`` is read if it exists),
runs data-parallel under ``torchrun``, and every ``--eval-every`` steps
reports accuracy and log loss on real tables (scikit-learn's bundled
classification sets), beside a LogisticRegression on the same splits: the
prior loss alone does not show whether the model has learned more than the
label marginal.

The machinery here is shared with ``skicml pretrain tabicl-regressor``
(:mod:`skicml.tabicl._pretrain_regressor`): the prior as a stream
(:class:`_PriorSource`), the loss over groups of tables of one width
(:func:`loss_by_width`), the options (:func:`add_recipe_options`), and the
run (:func:`run_prior_recipe`: the prior stream, data-parallel, and the
export with the prior's settings, through the recipes' one runner,
:func:`skicml.utils.pretraining.run_recipe`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np
import torch
import torch.nn.functional as F

from .._weights import save_weights
from ..utils.pretraining import add_run_options, final_loss, recipe_provenance, run_recipe
from ._model import TabICLModel
from .prior import PriorConfig, TabularPrior

__all__ = ["PRESETS", "add_recipe_options", "loss_by_width", "main", "real_table_scores", "run_prior_recipe"]

#: ``skicml pretrain tabicl`` (found by :func:`skicml.utils.discovery.all_pretrain_recipes`).
RECIPE_NAME = "tabicl"

#: Model sizes. ``small`` is what CPU pretraining affords (spec section 3.3).
PRESETS = {
    "tiny": dict(embed_dim=16, col_num_blocks=1, col_nhead=2, col_num_inds=8, row_num_blocks=1, row_nhead=2,
                 row_num_cls=2, icl_num_blocks=1, icl_nhead=2),
    "small": dict(embed_dim=32, col_num_blocks=1, col_nhead=4, col_num_inds=16, row_num_blocks=1, row_nhead=4,
                  row_num_cls=4, icl_num_blocks=3, icl_nhead=4),
    "base": dict(embed_dim=64, col_num_blocks=2, col_nhead=4, col_num_inds=32, row_num_blocks=2, row_nhead=4,
                 row_num_cls=4, icl_num_blocks=6, icl_nhead=4),
    "paper": dict(),
}


def loss_by_width(model, batch, test_loss):
    """Sum of ``test_loss(outputs, y_test)`` over the groups of tables of one width.

    Tables are zero-padded to the prior's width. Running the tables of each
    width on their own columns only is exact for v1 (whose row stage masks
    the padding) and is what a v2 network with feature groups sees at
    inference (it has no mask, and the official training feeds it the zero
    columns); it also skips the padding's cost (the prior draws widths per
    group of tables, so a batch holds a few distinct widths).

    Parameters
    ----------
    model : callable
        ``model(X, y_train) -> outputs`` for the test rows.
    batch : dict
        A prior batch: ``X``, ``y``, ``n_features``, ``n_train``.
    test_loss : callable
        ``test_loss(outputs, y_test) -> scalar`` summed over its rows.
    """
    n_train = batch["n_train"]
    X, y, n_features = batch["X"], batch["y"], batch["n_features"]
    total = 0.0
    for width in torch.unique(n_features).tolist():
        rows = (n_features == width).nonzero().squeeze(1)
        y_part = y.index_select(0, rows)
        outputs = model(X.index_select(0, rows)[..., :width], y_part[:, :n_train])
        total = total + test_loss(outputs, y_part[:, n_train:])
    return total


def _summed_cross_entropy(logits, y_test):
    return F.cross_entropy(logits.flatten(0, 1).float(), y_test.flatten(), reduction="sum")


def prior_loss(model, batch):
    """Cross-entropy of the test rows over all ``max_classes`` logits."""
    y = batch["y"]
    return loss_by_width(model, batch, _summed_cross_entropy) / (y.shape[0] * (y.shape[1] - batch["n_train"]))


class _PriorSource:
    """The prior as a stream of batches for :func:`skicml.utils.training.pretrain`."""

    def __init__(self, prior, batch_size):
        self.prior = prior
        self.batch_size = batch_size

    def sample(self):
        return self.prior.sample(self.batch_size)

    def state_dict(self):
        return self.prior.state_dict()

    def load_state_dict(self, state):
        self.prior.load_state_dict(state)


def _real_tables():
    from sklearn.datasets import load_breast_cancer, load_iris, load_wine

    return {name: loader(return_X_y=True) for name, loader in
            (("iris", load_iris), ("wine", load_wine), ("breast_cancer", load_breast_cancer))}


def real_table_scores(model, max_train=256, seeds=(0, 1, 2), with_baseline=False):
    """Accuracy and log loss of one plain model member on real tables.

    Features are standardised with training statistics and clipped; no
    ensembling, so this tracks the network itself.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    device = next(model.parameters()).device
    accuracy, losses, baseline = [], [], []
    for X, y in _real_tables().values():
        for seed in seeds:
            X_tr, X_te, y_tr, y_te = train_test_split(
                X, y, train_size=min(max_train, int(0.7 * len(y))), stratify=y, random_state=seed
            )
            mean, std = X_tr.mean(0), X_tr.std(0) + 1e-6
            table = np.clip((np.vstack([X_tr, X_te]) - mean) / std, -100, 100)
            X_t = torch.tensor(table, dtype=torch.float32, device=device).unsqueeze(0)
            y_t = torch.tensor(y_tr, device=device).unsqueeze(0)
            logits = model.predict_logits(X_t, y_t)[0]
            proba = torch.softmax(logits.double() / 0.9, dim=-1).cpu().numpy()
            accuracy.append(float((proba.argmax(1) == y_te).mean()))
            losses.append(log_loss(y_te, proba, labels=np.unique(y_tr)))
            if with_baseline:
                lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(X_tr, y_tr)
                baseline.append(log_loss(y_te, lr.predict_proba(X_te), labels=np.unique(y_tr)))
    scores = {"real_accuracy": float(np.mean(accuracy)), "real_log_loss": float(np.mean(losses))}
    if with_baseline:
        scores["logistic_log_loss"] = float(np.mean(baseline))
    return scores


def add_recipe_options(parser, checkpoint, steps=12000, batch_size=16, lr=2e-3, max_features=24):
    """The options both TabICL recipes take: schedule, prior size, run, resumption, warm start.

    The run options are :func:`skicml.utils.pretraining.add_run_options`'s,
    with ``checkpoint`` as the default checkpoint file, so that a run is
    resumable without naming one.
    """
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--batch-size", type=int, default=batch_size, help="tables per step (per process)")
    parser.add_argument("--lr", type=float, default=lr)
    parser.add_argument("--warmup", type=float, default=0.02, help="warmup share of the steps")
    parser.add_argument("--min-rows", type=int, default=64)
    parser.add_argument("--max-rows", type=int, default=256)
    parser.add_argument("--max-features", type=int, default=max_features)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    add_run_options(parser)
    parser.set_defaults(checkpoint=checkpoint)
    parser.add_argument("--checkpoint-every", type=int, default=250)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--init-from", default=None,
                        help="start from these weights (a shipped weights file or a checkpoint) with a fresh "
                             "schedule; ignored when --checkpoint already exists")
    return parser


def build_parser():
    parser = argparse.ArgumentParser(prog="skicml pretrain tabicl", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small")
    parser.add_argument("--max-classes", type=int, default=10)
    parser.add_argument("--row-blocks", type=int, default=None,
                        help="row-interaction blocks (default: the preset's); --init-from weights with fewer "
                             "blocks fill the last ones and the new first blocks start as the identity")
    parser.add_argument("--binary-prob", type=float, default=PriorConfig.binary_prob,
                        help="share of two-class tables (the rest draw K uniformly up to --max-classes)")
    parser.add_argument("--categorical-prob", type=float, default=PriorConfig.categorical_prob,
                        help="share of tables in which some columns become categorical codes")
    return add_recipe_options(parser, checkpoint="tabicl_pretrain.ckpt")


def main(argv=None):
    args = build_parser().parse_args(argv)
    config = dict(PRESETS[args.preset], max_classes=args.max_classes)
    if args.row_blocks is not None:
        config["row_num_blocks"] = args.row_blocks
    prior_config = PriorConfig(max_features=args.max_features, max_classes=args.max_classes,
                               min_rows=args.min_rows, max_rows=args.max_rows, binary_prob=args.binary_prob,
                               categorical_prob=args.categorical_prob)
    run_prior_recipe(
        args, argv, RECIPE_NAME, lambda run: TabICLModel(**config), prior_config, prior_loss,
        evaluate=real_table_scores, final_scores=lambda model: real_table_scores(model, with_baseline=True),
        warm_start=load_deepening_rows,
    )
    return 0


def run_prior_recipe(args, argv, recipe_name, build_model, prior_config, loss_fn, *, evaluate, final_scores,
                     warm_start=None):
    """Run a TabICL recipe through :func:`skicml.utils.pretraining.run_recipe`.

    What the two TabICL recipes share: the prior as the stream (each
    ``torchrun`` rank draws its own tables), data-parallel training, the
    options of :func:`add_recipe_options`, and the export with the prior's
    settings (:func:`_export`).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed :func:`add_recipe_options` (and ``--preset``).
    argv : list of str or None
        The command line, recorded in the provenance.
    recipe_name : str
    build_model : callable
        ``build_model(run) -> nn.Module``, called after seeding with ``--seed``.
    prior_config : PriorConfig
    loss_fn : callable
        ``loss_fn(model, batch) -> scalar``.
    evaluate : callable
        ``evaluate(model) -> dict`` of metrics, every ``--eval-every`` steps.
    final_scores : callable
        ``final_scores(model) -> dict``, recorded in the exported provenance.
    warm_start : callable or None
        ``warm_start(model, state)`` loads ``--init-from`` weights; ``None``
        loads them strictly.

    Returns
    -------
    dict
        The step loop's history.
    """

    def prior_source(run):
        prior = TabularPrior(prior_config, seed=args.seed * 1000 + run.rank, device=run.device)
        return _PriorSource(prior, args.batch_size)

    return run_recipe(
        args, argv, recipe_name, build_model=build_model, make_source=prior_source, loss=loss_fn,
        evaluate=lambda model, step: evaluate(model), export=lambda run: _export(run, prior_config, final_scores),
        warm_start=warm_start, distributed=True, device=args.device, warmup_fraction=args.warmup, grad_clip=1.0,
        checkpoint_every=args.checkpoint_every,
    )


def load_deepening_rows(model, state):
    """Load ``state`` into ``model``, which may have more row-interaction blocks.

    The given blocks become the model's *last* ones and the extra first blocks
    keep their fresh initialisation, which is the identity (zero output
    projections). The last block is the one that pools the cells into the CLS
    tokens, so it must stay last; with identity blocks before it the deepened
    model computes exactly what ``state`` did, and training starts from there.
    """
    prefix = "row_interactor.tf_row.blocks."

    def split(key):  # "<prefix>3.attn.out_proj.weight" -> (3, "attn.out_proj.weight")
        index, rest = key[len(prefix):].split(".", 1)
        return int(index), rest

    have = len(model.row_interactor.tf_row.blocks)
    given = 1 + max((split(k)[0] for k in state if k.startswith(prefix)), default=-1)
    if given > have:
        raise ValueError(f"The weights have {given} row blocks and the model {have}: a model can only be deepened.")
    shift = have - given
    if not shift:
        model.load_state_dict(state)
        return model
    moved = {}
    for key, value in state.items():
        if key.startswith(prefix):
            index, rest = split(key)
            key = f"{prefix}{index + shift}.{rest}"
        moved[key] = value
    missing, unexpected = model.load_state_dict(moved, strict=False)
    new = tuple(f"{prefix}{i}." for i in range(shift))
    wrong = [k for k in missing if not k.startswith(new)] + list(unexpected)
    if wrong:
        raise ValueError(f"The weights do not match the model beyond its row blocks: {wrong[:5]}")
    return model


def _export(run, prior_config, final_scores):
    """Write the shippable weights with their provenance (settings, prior, steps, seed, scores, hash).

    The recorded recipe is the command that started the checkpoint (a later
    ``--export-now`` call names only the files).
    """
    args, model, history = run.args, run.model, run.history
    model.eval()
    with torch.no_grad():
        final = final_scores(model)
    provenance = recipe_provenance(
        run, ("steps", "steps_planned", "batch_size", "lr", "seed", "train_seconds"),
        recipe=history.get("meta", {}).get("recipe", run.command), preset=args.preset,
        tables_seen=history["items"], prior=json.dumps(dataclasses.asdict(prior_config)),
        final_prior_loss=final_loss(history, window=200), **{k: round(v, 4) for k, v in final.items()},
    )
    digest = save_weights(args.export, model.state_dict(), model.config, provenance)
    print(f"wrote {args.export} (sha256 {digest})")
    print(json.dumps(provenance, indent=1))
