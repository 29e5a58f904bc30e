"""
Choosing a kNN context without labels
=====================================

How many neighbours should a kNN context have? The context score ``tau``
answers from the spectrum of the context alone, without a label. Here it is
computed over a range of ``n_neighbors`` and set beside the error of a ridge
probe that does see the labels (at its best embedding width, the paper's
protocol), on two datasets:

- the diabetes regression, where the two agree: both fall as the context
  widens from a handful of neighbours, and ``tau`` picks a context whose
  error is close to the best;
- the digits, where they disagree: the strongest contexts (fewest
  neighbours) give the best probe, but their ``tau`` sits near ``beta + 1 =
  2``, where the paper says the score abstains, and ``tau`` keeps falling as
  the contexts weaken. Compare contexts with ``tau`` when they are of one
  type and moderate strength, and keep a few labels to confirm.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes, load_digits
from sklearn.linear_model import Ridge
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skicml.contexture import ContextureEmbedding, KNNContext

WIDTHS = [1, 2, 4, 8, 16, 32, 64, 128]
NEIGHBOURS = [3, 5, 8, 12, 20, 32, 50, 80, 128]


def sweep(X, y, classification):
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.4, random_state=0)
    taus, errors, curves = [], [], {}
    for k in NEIGHBOURS:
        embedding = ContextureEmbedding(KNNContext(k), n_components=max(WIDTHS), max_components=256,
                                        random_state=0)
        Z_train, Z_test = embedding.fit_transform(X_train), embedding.transform(X_test)
        scores = []
        for d in WIDTHS:
            if classification:
                targets = (y_train[:, None] == np.arange(10)).astype(float)
                predicted = Ridge(1e-3).fit(Z_train[:, :d], targets).predict(Z_test[:, :d]).argmax(1)
                scores.append(np.mean(predicted != y_test))
            else:
                predicted = Ridge(1e-3).fit(Z_train[:, :d], y_train).predict(Z_test[:, :d])
                scores.append(np.mean((predicted - y_test) ** 2))
        taus.append(embedding.tau_)
        errors.append(min(scores))
        curves[k] = embedding.tau_curve_
    return np.array(taus), np.array(errors), curves


X, y = load_diabetes(return_X_y=True)
X = StandardScaler().fit_transform(X)
results = {"diabetes (MSE)": sweep(X, (y - y.mean()) / y.std(), classification=False)}
X, y = load_digits(return_X_y=True)
results["digits (error rate)"] = sweep(X / 16.0, y, classification=True)

for name, (taus, errors, _) in results.items():
    print(f"{name}: tau picks n_neighbors={NEIGHBOURS[int(np.argmin(taus))]} (error {errors[np.argmin(taus)]:.3f}), "
          f"the best is n_neighbors={NEIGHBOURS[int(np.argmin(errors))]} (error {errors.min():.3f}); "
          f"Pearson(tau, error) = {np.corrcoef(taus, errors)[0, 1]:+.2f}")

fig, axes = plt.subplots(2, 3, figsize=(13, 7))
for row, (name, (taus, errors, curves)) in zip(axes, results.items()):
    row[0].semilogx(NEIGHBOURS, taus, "o-")
    row[0].axhspan(1.95, 2.05, color="0.9", label="abstain (|tau - 2| < 0.05)")
    row[0].set(xlabel="n_neighbors", ylabel="tau (no labels)", title=f"{name}: context score")
    row[0].legend()
    row[1].semilogx(NEIGHBOURS, errors, "o-", color="C1")
    row[1].set(xlabel="n_neighbors", ylabel="probe error", title=f"{name}: ridge probe (labels)")
    for k in (5, 20, 80):
        row[2].semilogx(np.arange(1, curves[k].size + 1), curves[k], label=f"K={k}")
    row[2].set(xlabel="d", ylabel="tau_d", title="tau_d against the width", ylim=(1, 3))
    row[2].legend()
fig.tight_layout()
plt.show()
