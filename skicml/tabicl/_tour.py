"""TabICL's row of ``skicml tour``."""

import time

import numpy as np

from ..utils.tour import TourEntry


def _run():
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from ._classifier import TabICLClassifier

    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=256, stratify=y, random_state=0)
    start = time.perf_counter()
    proba = TabICLClassifier(n_estimators=8, random_state=0).fit(X_train, y_train).predict_proba(X_test)
    seconds = time.perf_counter() - start
    baseline = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(X_train, y_train)
    return {"score": log_loss(y_test, proba), "baseline_score": log_loss(y_test, baseline.predict_proba(X_test)),
            "seconds": seconds}


def _run_regression():
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import RidgeCV
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from ._regressor import TabICLRegressor

    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=256, random_state=0)
    start = time.perf_counter()
    pred = TabICLRegressor(random_state=0).fit(X_train, y_train).predict(X_test)
    seconds = time.perf_counter() - start
    baseline = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))).fit(X_train, y_train)

    def rmse(prediction):
        return float(np.sqrt(np.mean((prediction - y_test) ** 2)))

    return {"score": rmse(pred), "baseline_score": rmse(baseline.predict(X_test)), "seconds": seconds}


def tour_entries():
    return [TourEntry("TabICLClassifier", "breast_cancer, 256 train rows", "log loss (lower is better)",
                      "LogisticRegression", _run),
            TourEntry("TabICLRegressor", "diabetes, 256 train rows", "RMSE (lower is better)", "RidgeCV",
                      _run_regression)]
