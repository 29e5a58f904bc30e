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

    python benchmarks/bench_wearable_baseline_features.py
"""

import argparse
import warnings

import numpy as np
import pandas as pd

from skicml.datasets import make_wearable_cohort, wearable_variables
from skicml.wearable import WeeklySummaryFeatures, evaluate_probes
from skicml.wearable._features import _STATISTICS
from skicml.wearable._pretrain import week_labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=1000)
    args = parser.parse_args()
    X, meta, y_static, y_weekly = make_wearable_cohort(n_people=args.people, n_weeks=4, random_state=2024)
    labels, people = week_labels(meta, y_static, y_weekly), meta["person_id"].to_numpy()
    names = list(wearable_variables("core")["name"])
    features = WeeklySummaryFeatures(channel_names=names).fit_transform(X)
    # Columns are grouped by variable, then statistic (see get_feature_names_out).
    variable_of = np.repeat(names, len(_STATISTICS))
    statistic_of = np.tile(_STATISTICS, len(names))

    subsets = {"all statistics": np.ones(features.shape[1], bool)}
    subsets.update({f"only {name}": variable_of == name for name in names})
    subsets.update({f"only {stat}": statistic_of == stat for stat in _STATISTICS})
    subsets["mean and std"] = np.isin(statistic_of, ["mean", "std"])
    subsets["all but std"] = statistic_of != "std"
    candidates = {subset: features[:, columns] for subset, columns in subsets.items()}
    observed = ~np.isnan(X)
    z = np.where(observed, (X - np.nanmean(X, axis=(0, 1))) / np.nanstd(X, axis=(0, 1)), 0.0)
    candidates["hour-means of inputs"] = np.hstack([z.mean(axis=1), observed.mean(axis=1)])
    table = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of the tiny subsets
        for subset, F in candidates.items():
            table[subset] = evaluate_probes(F, labels, people).set_index("task")["score"]
    print("AUROC (MAE in hours for sleep_duration) of linear probes on subsets of the summary statistics")
    print(pd.DataFrame(table).T.round(3).to_string())


if __name__ == "__main__":
    main()
