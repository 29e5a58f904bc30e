"""
=========================================================
TabICL without labels: imputation, outliers, new rows
=========================================================

The joint density of a table factors by the chain rule into one conditional
per column, and each conditional is an in-context prediction: TabICL's
regressor for a numeric column, its classifier for a categorical one.
:class:`~skicml.tabicl.TabICLImputer` fills missing cells with those
predictions; :class:`~skicml.tabicl.TabICLOutlierDetector` scores rows by
their log joint density, averaged over column orders, and draws new rows
from it. Both use the shipped models.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes, load_wine
from sklearn.ensemble import IsolationForest
from sklearn.impute import SimpleImputer
from sklearn.metrics import roc_auc_score

from skicml.tabicl import TabICLImputer, TabICLOutlierDetector

# %%
# Imputation: remove 20% of the cells of the diabetes table at random and
# fill them back, column by column from the other columns.
X, _ = load_diabetes(return_X_y=True)
rng = np.random.RandomState(0)
holes = rng.rand(*X.shape) < 0.2
X_missing = np.where(holes, np.nan, X)
scale = X.std(0)
for imputer in (SimpleImputer(), TabICLImputer(n_estimators=2, random_state=0)):
    filled = imputer.fit_transform(X_missing)
    rmse = np.sqrt(np.mean(((filled - X) / scale)[holes] ** 2))
    print(f"{type(imputer).__name__:>14}: held-out RMSE {rmse:.3f} (column standard deviations)")

# %%
# Outlier scores: wine's classes 0 and 1 are the inliers; a few rows whose
# values are each ordinary but taken from different wines are the outliers
# (their columns no longer agree with each other).
X, y = load_wine(return_X_y=True)
inliers = X[y != 2]
train, test = inliers[::2], inliers[1::2]
shuffled = np.column_stack([test[rng.permutation(len(test))[:8], j] for j in range(X.shape[1])])
X_test = np.vstack([test, shuffled])
is_outlier = np.r_[np.zeros(len(test)), np.ones(len(shuffled))]
detector = TabICLOutlierDetector(n_permutations=2, n_estimators=2, random_state=0).fit(train)
scores = detector.score_samples(X_test)
forest = IsolationForest(random_state=0).fit(train)
print(f"ROC AUC: TabICLOutlierDetector {roc_auc_score(is_outlier, -scores):.3f}, "
      f"IsolationForest {roc_auc_score(is_outlier, -forest.score_samples(X_test)):.3f}")

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
left.hist([scores[is_outlier == 0], scores[is_outlier == 1]], bins=20, label=["inliers", "shuffled rows"])
left.axvline(detector.offset_, color="k", linestyle="--", label="offset_ (contamination 0.1)")
left.set_xlabel("log joint density (standardised units)")
left.legend()

# %%
# Synthetic rows: draw as many rows as the training half, column by column
# along the fitted orders, and compare two correlated columns with the real ones.
synthetic = detector.sample(len(train), random_state=0)
i, j = 5, 6  # total phenols and flavanoids
right.scatter(train[:, i], train[:, j], s=12, label="training rows")
right.scatter(synthetic[:, i], synthetic[:, j], s=12, marker="x", label="sampled rows")
right.set_xlabel("total phenols")
right.set_ylabel("flavanoids")
right.legend()
print(f"correlation of the two columns: real {np.corrcoef(train[:, i], train[:, j])[0, 1]:.2f}, "
      f"sampled {np.corrcoef(synthetic[:, i], synthetic[:, j])[0, 1]:.2f}")
plt.tight_layout()
plt.show()
