"""
=============================================
TabICL in a Pipeline, tuned with GridSearchCV
=============================================

:class:`~skicml.TabICLClassifier` has no training loop: ``fit`` encodes the
training table once, and every ``predict_proba`` only encodes the new rows.
It therefore composes with scikit-learn's model selection like any other
classifier, and repeated predictions on one fit are cheap.
"""

# %%
import time

import matplotlib.pyplot as plt
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skicml import TabICLClassifier

X, y = load_breast_cancer(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=256, stratify=y, random_state=0)

# %%
# Tune the size of the ensemble and the softmax temperature by cross-validated
# log loss, inside a pipeline. ``"auto"`` (the default) fits the temperature
# at each ``fit`` on training rows held out from the context; 0.9 is the
# paper's fixed value.
pipeline = make_pipeline(StandardScaler(), TabICLClassifier(random_state=0))
search = GridSearchCV(
    pipeline,
    {"tabiclclassifier__n_estimators": [1, 4], "tabiclclassifier__softmax_temperature": ["auto", 0.9]},
    scoring="neg_log_loss", cv=3,
)
search.fit(X_train, y_train)
print("best parameters:", search.best_params_)
print("test log loss:", log_loss(y_test, search.predict_proba(X_test)))

# %%
# The same question asked of a logistic regression.
baseline = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(X_train, y_train)
print("LogisticRegression test log loss:", log_loss(y_test, baseline.predict_proba(X_test)))

# %%
# Ensembling over column orders, class shifts and normalisations: log loss
# against the number of members.
members = [1, 4, 8]
losses = []
for n in members:
    clf = TabICLClassifier(n_estimators=n, random_state=0).fit(X_train, y_train)
    losses.append(log_loss(y_test, clf.predict_proba(X_test)))

# %%
# Predicting again on the same fit reuses the cached training context.
clf = TabICLClassifier(n_estimators=8, random_state=0).fit(X_train, y_train)
print(f"fitted softmax temperature: {clf.softmax_temperature_:.2f}")
start = time.perf_counter()
clf.predict_proba(X_test)
print(f"predict_proba on {len(X_test)} rows: {time.perf_counter() - start:.3f} s")

fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(members, losses, marker="o", label="TabICLClassifier")
ax.axhline(log_loss(y_test, baseline.predict_proba(X_test)), color="grey", linestyle=":", label="LogisticRegression")
ax.set_xscale("log", base=2)
ax.set_xlabel("ensemble members")
ax.set_ylabel("test log loss")
ax.legend()
fig.tight_layout()
plt.show()
