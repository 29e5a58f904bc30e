"""Which summary statistics carry each wearable label? The baseline, taken apart.

Probes the labels of the evaluation cohort of ``bench_wearable_probes.py``
(1,000 people x 4 weeks, ``random_state=2024``) with
:class:`WeeklySummaryFeatures` restricted to one variable at a time, then to
one statistic at a time, through the same :func:`evaluate_probes` protocol.
A label that one variable's statistics already predict near the full set is
a level shift of that variable, which no encoder can beat by much. Two more
rows compare the statistics with what a mean over hourly tokens holds: the
per-variable mean and standard deviation over observed hours together, and
``hour-means of inputs``, the mean over all 168 hours of each variable's
z-score (0 where missing) and of its observed bit, which is all that a mean
over tokens linear in the hour's values and mask could hand a linear probe.
The last two rows go the other way, to a finer resolution than any week
embedding: all statistics plus each day's mean, maximum, minimum and
observed share of every variable (336 more columns), once in calendar order
and once sorted over the seven days per column, so that a fever on Monday
and one on Friday land in the same column. They tell whether day-by-day
detail the summary misses is there for a linear probe to use.

    python benchmarks/bench_wearable_baseline_features.py
    python benchmarks/bench_wearable_baseline_features.py --effect-size 0.5
"""

import argparse
import warnings

import numpy as np
import pandas as pd

from skicml.datasets import make_wearable_cohort, wearable_variables, wearable_week_labels
from skicml.wearable import WeeklySummaryFeatures, evaluate_probes

STATISTICS = WeeklySummaryFeatures.statistics


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=1000)
    parser.add_argument("--effect-size", type=float, default=1.0)
    args = parser.parse_args()
    X, meta, y_static, y_weekly = make_wearable_cohort(
        n_people=args.people, n_weeks=4, effect_size=args.effect_size, random_state=2024
    )
    labels, people = wearable_week_labels(meta, y_static, y_weekly), meta["person_id"].to_numpy()
    print("positives (people for static labels, weeks for weekly ones):", {
        task: int((y_static if task in y_static else y_weekly)[task].sum())
        for task in labels.columns if task != "sleep_duration"
    })
    names = list(wearable_variables("core")["name"])
    features = WeeklySummaryFeatures(channel_names=names).fit_transform(X)
    # Columns are grouped by variable, then statistic (see get_feature_names_out).
    variable_of = np.repeat(names, len(STATISTICS))
    statistic_of = np.tile(STATISTICS, len(names))

    subsets = {"all statistics": np.ones(features.shape[1], bool)}
    subsets.update({f"only {name}": variable_of == name for name in names})
    subsets.update({f"only {stat}": statistic_of == stat for stat in STATISTICS})
    subsets["mean and std"] = np.isin(statistic_of, ["mean", "std"])
    subsets["all but std"] = statistic_of != "std"
    candidates = {subset: features[:, columns] for subset, columns in subsets.items()}
    observed = ~np.isnan(X)
    z = np.where(observed, (X - np.nanmean(X, axis=(0, 1))) / np.nanstd(X, axis=(0, 1)), 0.0)
    candidates["hour-means of inputs"] = np.hstack([z.mean(axis=1), observed.mean(axis=1)])
    days = _day_statistics(X)
    candidates["all + days"] = np.hstack([features, days.reshape(len(X), -1)])
    candidates["all + sorted days"] = np.hstack([features, np.sort(days, axis=1).reshape(len(X), -1)])
    table = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of the tiny subsets
        for subset, F in candidates.items():
            table[subset] = evaluate_probes(F, labels, people).set_index("task")["score"]
    print("AUROC (MAE in hours for sleep_duration) of linear probes on subsets of the summary statistics")
    print(pd.DataFrame(table).T.round(3).to_string())


def _day_statistics(X):
    """Each day's mean, max, min and observed share per variable, (n_weeks, 7, 4 V); gaps get the column mean."""
    days = X.reshape(len(X), 7, 24, X.shape[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # all-missing days
        statistics = np.concatenate(
            [np.nanmean(days, 2), np.nanmax(days, 2), np.nanmin(days, 2), (~np.isnan(days)).mean(2)], axis=-1
        )
        return np.where(np.isnan(statistics), np.nanmean(statistics, axis=(0, 1)), statistics)


if __name__ == "__main__":
    main()
