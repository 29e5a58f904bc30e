"""Which summary statistics carry each wearable label? The baseline, taken apart.

Probes the labels of the evaluation cohort of ``bench_wearable_probes.py``
(1,000 people x 4 weeks, ``random_state=2024``) with
:class:`WeeklySummaryFeatures` restricted to one variable at a time, then to
one statistic at a time, through the same :func:`evaluate_probes` protocol.
A label that one variable's statistics already predict near the full set is
a level shift of that variable, which no encoder can beat by much.

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
    table = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of the tiny subsets
        for subset, columns in subsets.items():
            table[subset] = evaluate_probes(features[:, columns], labels, people).set_index("task")["score"]
    print("AUROC (MAE in hours for sleep_duration) of linear probes on subsets of the summary statistics")
    print(pd.DataFrame(table).T.round(3).to_string())


if __name__ == "__main__":
    main()
