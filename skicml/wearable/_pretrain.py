"""``skicml pretrain wearable``: pretrain the shipped wearable encoder on a synthetic cohort.

The recipe behind ``skicml/wearable/_weights/``::

    skicml pretrain wearable --people 3000 --weeks 4 --epochs 12 --checkpoint-dir run/
    skicml pretrain wearable --checkpoint-dir run/ --export wearable.pt   # shippable file

Training resumes from ``--checkpoint-dir`` where a previous run stopped. The
encoder is judged the way it will be used: frozen embeddings and linear
probes on held-out people of a second cohort, beside the summary-statistics
baseline on the same splits; both tables land in the file's provenance.
"""

from __future__ import annotations

import argparse
import sys

from sklearn.exceptions import NotFittedError

from ..datasets import make_wearable_cohort, wearable_variables, wearable_week_labels
from ..utils.pretraining import RecipeRun, recipe_provenance, set_threads
from ._encoder import WearableEncoder
from ._evaluation import evaluate_probes
from ._features import WeeklySummaryFeatures
from ._model import POOLINGS

__all__ = ["main", "probe_report"]

#: ``skicml pretrain wearable`` (found by :func:`skicml.utils.discovery.all_pretrain_recipes`).
RECIPE_NAME = "wearable"


def build_parser():
    parser = argparse.ArgumentParser(prog="skicml pretrain wearable", description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=2000, help="people in the pretraining cohort")
    parser.add_argument("--weeks", type=int, default=4, help="weeks per person")
    parser.add_argument("--variables", default="core", help="core, extended or full")
    parser.add_argument("--backbone", default="mamba2", choices=["mamba2", "transformer"])
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--n-layers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--objective", default="infonce", choices=["infonce", "masked"])
    parser.add_argument("--visible-weight", type=float, default=0.0,
                        help="masked objective: weight of reconstructing the hours shown")
    parser.add_argument("--day-context", action="store_true",
                        help="tokens also read the same hour a day before and after")
    parser.add_argument("--pooling", default="mean", choices=POOLINGS,
                        help="how hourly tokens become the week embedding")
    parser.add_argument("--positive-pairs", default="augment", choices=["augment", "participant"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-people", type=int, default=600, help="people in the held-out probe cohort")
    parser.add_argument("--checkpoint-dir", default=None, help="resumable training state")
    parser.add_argument("--export", default=None, help="write the shippable encoder file here")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quiet", action="store_true")
    return parser


def probe_report(transformer, n_people=600, n_weeks=4, variables="core", seed=12345):
    """Probe scores of ``transformer``'s features on a fresh cohort, by task.

    The cohort's seed differs from any pretraining seed, so the people are
    new to the encoder. Returns the :func:`evaluate_probes` table.
    """
    X, meta, y_static, y_weekly = make_wearable_cohort(
        n_people=n_people, n_weeks=n_weeks, variables=variables, random_state=seed
    )
    try:
        features = transformer.transform(X)
    except NotFittedError:
        features = transformer.fit_transform(X)
    labels = wearable_week_labels(meta, y_static, y_weekly)
    return evaluate_probes(features, labels, meta["person_id"].to_numpy())


def main(argv=None):
    args = build_parser().parse_args(argv)
    set_threads(args)
    X, meta, _, _ = make_wearable_cohort(
        n_people=args.people, n_weeks=args.weeks, variables=args.variables, random_state=args.seed
    )
    encoder = WearableEncoder(
        backbone=args.backbone, d_model=args.d_model, n_layers=args.n_layers, dropout=args.dropout,
        max_epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
        objective=args.objective, visible_weight=args.visible_weight, day_context=args.day_context,
        pooling=args.pooling, positive_pairs=args.positive_pairs,
        checkpoint_dir=args.checkpoint_dir,
        device="auto", random_state=args.seed, verbose=0 if args.quiet else 1,
    )
    encoder.fit(X, groups=meta["person_id"].to_numpy())
    report = probe_report(encoder, n_people=args.eval_people, variables=args.variables)
    baseline = probe_report(WeeklySummaryFeatures(), n_people=args.eval_people, variables=args.variables)
    table = report[["task", "metric", "score"]].merge(
        baseline[["task", "score"]], on="task", suffixes=("", "_summary_features")
    )
    print(table.to_string(index=False))
    if args.export:
        encoder.config_["channel_names"] = list(wearable_variables(args.variables)["name"])
        # The epoch loop trained it (the estimator's fit, resumable from --checkpoint-dir), not the recipes' step
        # loop: the provenance is the recipes' all the same.
        encoder.provenance_ = recipe_provenance(
            RecipeRun(args, RECIPE_NAME, argv), ("seed", "threads", "torch"),
            cohort=dict(n_people=args.people, n_weeks=args.weeks, variables=args.variables, random_state=args.seed),
            epochs=encoder.n_iter_, train_loss=[round(v, 4) for v in encoder.history_],
            train_minutes=encoder.provenance_["train_minutes"], probe_scores=table.round(4).to_dict(orient="list"),
        )
        digest = encoder.save(args.export)
        print(f"wrote {args.export} (sha256 {digest})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
