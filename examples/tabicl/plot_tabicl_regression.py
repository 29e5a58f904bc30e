"""
========================================================
Regression with uncertainty: TabICLRegressor's quantiles
========================================================

:class:`~skicml.TabICLRegressor` (TabICL v2's quantile head) predicts for
every row a whole distribution of its target, not one number: the mean, the
median, any quantile, a spread. Here it learns in context from 256 patients
of scikit-learn's diabetes table, beside a cross-validated ridge regression,
and its 80% intervals are checked against the test targets they should cover
four times in five.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skicml import TabICLRegressor

X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=256, random_state=0)

regressor = TabICLRegressor(random_state=0).fit(X_train, y_train)
outputs = regressor.predict(X_test, output=["mean", "quantiles"], alphas=[0.1, 0.5, 0.9])
mean, (low, median, high) = outputs["mean"], outputs["quantiles"].T
ridge = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))).fit(X_train, y_train)


def rmse(prediction):
    return np.sqrt(np.mean((prediction - y_test) ** 2))


print(f"RMSE  TabICLRegressor {rmse(mean):.1f}   RidgeCV {rmse(ridge.predict(X_test)):.1f}")
print(f"80% intervals cover {np.mean((y_test >= low) & (y_test <= high)):.2f} of the test targets")

# %%
# Each test patient's 80% interval against the truth, sorted by the
# predicted median: a wide interval says the model knows it is unsure.
order = np.argsort(median)
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.fill_between(np.arange(len(order)), low[order], high[order], color="tab:blue", alpha=0.25,
                label="80% interval")
ax.plot(median[order], color="tab:blue", label="predicted median")
ax.scatter(np.arange(len(order)), y_test[order], s=8, color="black", label="true target")
ax.set_xlabel("test patients, by predicted median")
ax.set_ylabel("disease progression")
ax.legend(loc="upper left")
fig.tight_layout()

# %%
# Coverage at other levels: a calibrated model's central ``p`` interval
# covers a share ``p`` of the targets.
levels = np.array([0.2, 0.4, 0.6, 0.8, 0.9])
bounds = regressor.predict(X_test, output="quantiles", alphas=np.r_[(1 - levels) / 2, (1 + levels) / 2])
coverage = [np.mean((y_test >= bounds[:, i]) & (y_test <= bounds[:, i + len(levels)]))
            for i in range(len(levels))]
for level, covered in zip(levels, coverage):
    print(f"central {level:.0%} interval covers {covered:.2f}")
