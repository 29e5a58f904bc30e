"""
==============================================
Predicting a health label in a Pipeline
==============================================

:class:`~skicml.WearableEncoder` is a scikit-learn transformer: it composes
with a probe in a :class:`~sklearn.pipeline.Pipeline`, and with other
features in a :class:`~sklearn.pipeline.FeatureUnion`, the way the paper
combines behavioral embeddings with a sensor (PPG) embedding. The shipped
encoder is frozen, so ``fit`` costs nothing beyond the probe.

Infections shift weekly means (fever, resting heart rate, steps), which the
summary statistics read directly: on this synthetic cohort they are the
stronger features, as the performance page records.
"""

# %%
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupShuffleSplit
from sklearn.pipeline import FeatureUnion, make_pipeline
from sklearn.preprocessing import StandardScaler

from skicml import WearableEncoder
from skicml.datasets import make_wearable_cohort
from skicml.wearable import WeeklySummaryFeatures

X, meta, y_static, y_weekly = make_wearable_cohort(n_people=400, n_weeks=2, random_state=1)
y = y_weekly["infection"].to_numpy()
train, test = next(GroupShuffleSplit(test_size=0.3, random_state=0).split(X, y, meta["person_id"]))
print(f"{y.mean():.1%} of weeks overlap an infection")


def auroc(model):
    model.fit(X[train], y[train])
    return roc_auc_score(y[test], model.predict_proba(X[test])[:, 1])


probe = LogisticRegression(max_iter=2000)
encoder = WearableEncoder(pretrained="wearable-core-small")
print("summary statistics   ", round(auroc(make_pipeline(WeeklySummaryFeatures(), StandardScaler(), probe)), 3))
print("shipped encoder      ", round(auroc(make_pipeline(encoder, StandardScaler(), probe)), 3))
union = FeatureUnion([("encoder", encoder), ("summary", WeeklySummaryFeatures())])
print("encoder + statistics ", round(auroc(make_pipeline(union, StandardScaler(), probe)), 3))

# %%
# Flattened weeks (one row of 168 x 12 values per week) work the same way
# once the encoder knows how many variables each hour has.
flat = X.reshape(len(X), -1)
embeddings = WearableEncoder(pretrained="wearable-core-small", n_channels=X.shape[2]).fit_transform(flat)
print(embeddings.shape, np.isfinite(embeddings).all())
