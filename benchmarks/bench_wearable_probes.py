"""Linear probes on wearable embeddings vs summary statistics, on held-out people.

The paper's protocol on skicml's synthetic cohort: features of each week,
then one probe per health label scored on people never seen by the probe
(5-fold GroupKFold; static labels at the person level). Contenders:

- ``summary+LR``: :class:`WeeklySummaryFeatures` into LogisticRegression /
  Ridge, the baseline a health-data scientist would use;
- ``summary+HGB``: the same features into HistGradientBoosting (5-fold, same splits);
- ``wbm-shipped``: the shipped encoder (bidirectional Mamba-2), frozen, or the
  file given as ``--pretrained``;
- ``untrained``: the shipped network's architecture with random weights
  (``max_epochs=0``), the control that shows what pretraining adds;
- ``mamba2`` and ``transformer``: both backbones pretrained here from scratch
  with the paper's contrastive objective and the same budget (``--epochs``)
  on the pretraining cohort;
- ``wbm+sensor``: the shipped encoder's embedding concatenated with the
  cohort's simulated sensor (PPG-like) embedding, the paper's fusion;
- ``summary+days``: the summary statistics plus each day's mean, maximum,
  minimum and observed share of every variable (336 more columns, those of
  ``bench_wearable_baseline_features.py``), into the same linear probes;
- ``wbm+summary``: the shipped encoder's embedding concatenated with the
  summary statistics, which tells whether the embedding adds to them.

``--temporal-labels`` draws the evaluation cohort with
``make_wearable_cohort(..., temporal_labels=True)``: the same people and
labels plus three whose signal is in the timing of sleep and activity
(``social_jet_lag``, ``sleep_irregularity``, ``phase_shift``), and
``--skip-hgb`` leaves out ``summary+HGB``, the slowest contender, and
``--skip-sensor`` the two with the simulated sensor embedding.

The pretraining and evaluation cohorts are drawn with different seeds, so the
evaluation people are new to every encoder. Prints AUROC (binary labels) and
MAE with R² (sleep duration) per label, pretraining time and transform
throughput, then each contender's gain over ``summary+LR`` with a paired
person-level bootstrap interval (the same people resampled for both), and
its wins: a win where the gain is positive, a clear one where the whole
interval is.

    python benchmarks/bench_wearable_probes.py                 # the recorded run
    python benchmarks/bench_wearable_probes.py --quick         # smoke test
    python benchmarks/bench_wearable_probes.py --eval-people 2000 --skip-pretraining
    python benchmarks/bench_wearable_probes.py --eval-people 2000 --skip-pretraining --skip-hgb --temporal-labels
"""

import argparse
import time

import numpy as np
import pandas as pd
import torch
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

from skicml.datasets import make_wearable_cohort, wearable_week_labels
from skicml.wearable import WearableEncoder, WeeklySummaryFeatures, evaluate_probes

from bench_wearable_baseline_features import _day_statistics


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pretrain-people", type=int, default=2000)
    parser.add_argument("--eval-people", type=int, default=1000)
    parser.add_argument("--weeks", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2, help="pretraining epochs of the from-scratch encoders")
    parser.add_argument("--effect-size", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pretrained", default="wearable-core-small",
                        help="the encoder to probe: a shipped name or a file written by WearableEncoder.save")
    parser.add_argument("--bootstraps", type=int, default=1000,
                        help="draws of the paired person-level bootstrap behind the intervals")
    parser.add_argument("--skip-pretraining", action="store_true",
                        help="leave out the encoders pretrained from scratch (mamba2, transformer)")
    parser.add_argument("--temporal-labels", action="store_true",
                        help="evaluate on a cohort with the temporal-pattern labels as well")
    parser.add_argument("--skip-hgb", action="store_true", help="leave out summary+HGB")
    parser.add_argument("--skip-sensor", action="store_true", help="leave out wbm+sensor and sensor only")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.pretrain_people, args.eval_people, args.weeks, args.epochs = 60, 400, 2, 1
    torch.set_num_threads(args.threads)

    X_pre, meta_pre, _, _ = make_wearable_cohort(
        n_people=args.pretrain_people, n_weeks=args.weeks, effect_size=args.effect_size, random_state=0
    )
    X, meta, y_static, y_weekly, sensor = make_wearable_cohort(
        n_people=args.eval_people, n_weeks=args.weeks, effect_size=args.effect_size,
        return_sensor_embedding=True, temporal_labels=args.temporal_labels, random_state=2024,
    )
    labels = wearable_week_labels(meta, y_static, y_weekly)
    groups = meta["person_id"].to_numpy()
    print(f"pretraining cohort: {args.pretrain_people} people x {args.weeks} weeks; evaluation cohort: "
          f"{args.eval_people} people x {args.weeks} weeks, effect_size={args.effect_size}")
    print("prevalence:", labels.drop(columns="sleep_duration").mean().round(3).to_dict())

    features, timing = {}, {}
    features["summary+LR"] = WeeklySummaryFeatures().fit_transform(X)
    features["summary+days"] = np.hstack([features["summary+LR"], _day_statistics(X).reshape(len(X), -1)])

    shipped = WearableEncoder(pretrained=args.pretrained).fit(X)
    start = time.perf_counter()
    features["wbm-shipped"] = shipped.transform(X)
    timing["wbm-shipped"] = (np.nan, len(X) / (time.perf_counter() - start))
    if not args.skip_sensor:
        features["wbm+sensor"] = np.hstack([features["wbm-shipped"], sensor])
    features["wbm+summary"] = np.hstack([features["wbm-shipped"], features["summary+LR"]])
    if not args.skip_sensor:
        features["sensor only"] = sensor

    # The control has the shipped network's architecture, with random weights.
    architecture = {k: v for k, v in shipped.config_.items() if k != "channel_names"}
    untrained = WearableEncoder(**architecture, max_epochs=0, random_state=0).fit(X_pre)
    features["untrained"] = untrained.transform(X)

    for backbone in () if args.skip_pretraining else ("mamba2", "transformer"):
        encoder = WearableEncoder(backbone=backbone, max_epochs=args.epochs, random_state=0, verbose=1)
        start = time.perf_counter()
        encoder.fit(X_pre)
        fit_seconds = time.perf_counter() - start
        start = time.perf_counter()
        features[backbone] = encoder.transform(X)
        timing[backbone] = (fit_seconds, len(X) / (time.perf_counter() - start))

    baseline = features["summary+LR"]
    scores, r2, gains = {}, {}, {}
    for name, F in features.items():
        report = evaluate_probes(
            F, labels, groups, baseline=None if name == "summary+LR" else baseline, n_bootstraps=args.bootstraps
        ).set_index("task")
        scores[name] = report["score"]
        r2[name] = report.loc["sleep_duration", "r2"]
        metrics = report["metric"]
        if name != "summary+LR":
            gains[name] = report[["gain", "gain_ci_low", "gain_ci_high"]]
    if not args.skip_hgb:
        hgb = evaluate_probes(
            baseline, labels, groups,
            classifier=HistGradientBoostingClassifier(random_state=0),
            regressor=HistGradientBoostingRegressor(random_state=0),
        )
        scores["summary+HGB"] = hgb.set_index("task")["score"]
    table = pd.DataFrame(scores)
    table.insert(0, "metric", metrics)
    print("\nProbe scores on held-out people (AUROC higher is better; sleep_duration is MAE in hours, lower is better)")
    print(table.round(3).to_string())
    print("\nR² of sleep_duration:", {k: round(v, 3) for k, v in r2.items()})

    print(f"\nGain over summary+LR, paired person-level bootstrap ({args.bootstraps} draws), "
          "gain [95% interval]; positive is better (AUROC up, MAE down):")
    print(pd.DataFrame({
        name: [f"{g:+.3f} [{lo:+.3f}, {hi:+.3f}]" for g, lo, hi in gain.to_numpy()]
        for name, gain in gains.items()
    }, index=table.index).to_string())

    print("\nAgainst summary+LR: wins (point estimate), clear wins and clear losses (interval beside 0):")
    for name, gain in gains.items():
        wins = list(gain.index[gain["gain"] > 0])
        clear = list(gain.index[gain["gain_ci_low"] > 0])
        lost = list(gain.index[gain["gain_ci_high"] < 0])
        print(f"  {name:12s} {len(wins)}/{len(gain)} wins; clear wins: {', '.join(clear) or '-'}; "
              f"clear losses: {', '.join(lost) or '-'}")

    print("\nPretraining time and transform throughput (2 threads):")
    for name, (fit_seconds, rate) in timing.items():
        print(f"  {name:12s} pretraining {fit_seconds:7.1f} s   transform {rate:8.0f} weeks/s")


if __name__ == "__main__":
    main()
