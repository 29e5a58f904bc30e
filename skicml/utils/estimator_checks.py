"""skicml's own common checks, run beside scikit-learn's on every estimator.

scikit-learn's ``check_estimator`` covers the API contract; these add what
users of a torch-backed toolkit rely on: the estimator composes with
``clone``, ``Pipeline`` and ``GridSearchCV(n_jobs=2)``, survives pickle and
joblib round trips with identical outputs, is reproducible under a fixed
``random_state``, and rejects bad input with a ``ValueError`` that names the
problem.
"""

from __future__ import annotations

import io
import pickle
from functools import partial

import joblib
import numpy as np
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.datasets import make_blobs, make_classification, make_regression
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import get_tags

__all__ = ["make_test_data", "outputs", "yield_skicml_checks"]


def make_test_data(estimator, random_state=0):
    """Small data that fits the estimator's 2-D path: ``(X, y)``."""
    from ._test_common import TEST_DATA

    name = type(estimator).__name__
    if name in TEST_DATA:
        return TEST_DATA[name](random_state)
    if is_classifier(estimator):
        return make_classification(
            n_samples=60, n_features=5, n_informative=3, n_redundant=0,
            n_classes=3, n_clusters_per_class=1, random_state=random_state,
        )
    if is_regressor(estimator):
        X, y = make_regression(n_samples=60, n_features=5, noise=0.1, random_state=random_state)
        return X, y
    X, _ = make_blobs(n_samples=60, n_features=5, centers=3, random_state=random_state)
    return X, None


def outputs(estimator, X):
    """Everything an estimator computes from ``X``, as a dict of arrays."""
    result = {}
    for method in ("predict_proba", "decision_function", "predict", "transform", "score_samples", "conditional"):
        if hasattr(estimator, method):
            out = getattr(estimator, method)(X)
            # A context's conditional matrix may be sparse.
            result[method] = out.toarray() if hasattr(out, "toarray") else np.asarray(out)
    return result


def _assert_same_outputs(a, b, X, what, exact=True):
    out_a, out_b = outputs(a, X), outputs(b, X)
    assert out_a.keys() == out_b.keys()
    for key in out_a:
        if exact or out_a[key].dtype.kind in "OUS":  # texts (generated captions) compare exactly
            np.testing.assert_array_equal(out_a[key], out_b[key], err_msg=f"{what}: {key} differs")
        else:
            np.testing.assert_allclose(out_a[key], out_b[key], rtol=1e-6, atol=1e-8,
                                       err_msg=f"{what}: {key} differs")


def check_clone_refit(estimator, X, y):
    """A clone fits and predicts like the original."""
    fitted = clone(estimator).fit(X, y)
    refitted = clone(fitted).fit(X, y)
    _assert_same_outputs(fitted, refitted, X, "clone of a fitted estimator refitted")


def check_reproducible(estimator, X, y):
    """Two fits with the same integer ``random_state`` agree exactly."""
    if "random_state" not in estimator.get_params():
        return
    first = clone(estimator).set_params(random_state=7).fit(X, y)
    second = clone(estimator).set_params(random_state=7).fit(X, y)
    _assert_same_outputs(first, second, X, "two fits with random_state=7")


def check_pickle_and_joblib_roundtrip(estimator, X, y):
    """pickle and joblib round trips keep every output identical."""
    fitted = clone(estimator).fit(X, y)
    restored = pickle.loads(pickle.dumps(fitted))
    _assert_same_outputs(fitted, restored, X, "pickle round trip")
    buffer = io.BytesIO()
    joblib.dump(fitted, buffer)
    buffer.seek(0)
    _assert_same_outputs(fitted, joblib.load(buffer), X, "joblib round trip")


def check_in_pipeline(estimator, X, y):
    """The estimator is a working last step of a Pipeline."""
    if not any(hasattr(estimator, m) for m in ("predict", "transform", "score_samples")):
        return  # A context is a parameter of an estimator, not a pipeline step.
    pipeline = make_pipeline(FunctionTransformer(), clone(estimator)).fit(X, y)
    alone = clone(estimator).fit(X, y)
    _assert_same_outputs(pipeline, alone, X, "Pipeline vs estimator alone", exact=False)


def _searchable_param(estimator):
    params = estimator.get_params()
    for name in ("max_epochs", "n_estimators", "n_components", "hidden_size", "lr", "alpha"):
        if name in params and isinstance(params[name], (int, float)) and not isinstance(params[name], bool):
            value = params[name]
            return name, [value, type(value)(value * 2 if isinstance(value, int) else value / 2)]
    return None, None


def check_grid_search_n_jobs(estimator, X, y):
    """GridSearchCV runs the estimator in two joblib workers."""
    name, values = _searchable_param(estimator)
    if name is None:
        return
    if y is None:
        return
    cv = StratifiedKFold(2) if is_classifier(estimator) else KFold(2)
    search = GridSearchCV(clone(estimator), {name: values}, cv=cv, n_jobs=2, error_score="raise")
    search.fit(X, y)
    assert search.best_params_[name] in values
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


def _fit_expecting_value_error(estimator, X, y, fragment):
    try:
        clone(estimator).fit(X, y)
    except ValueError as exc:
        message = str(exc).lower()
        assert any(f in message for f in fragment), (
            f"ValueError raised, but its message {str(exc)!r} does not name the "
            f"problem (expected one of {fragment})."
        )
        return
    raise AssertionError(f"fit accepted input with {fragment[0]} without a ValueError.")


def check_rejects_bad_input(estimator, X, y):
    """NaN/inf (unless allowed), empty input, wrong width and wrong ndim raise clearly."""
    X = np.asarray(X, dtype=np.float64)
    tags = get_tags(estimator)
    # NaN may be allowed (as missing values); infinity never is.
    for bad in (np.inf,) if tags.input_tags.allow_nan else (np.nan, np.inf):
        X_bad = X.copy()
        X_bad[0, 0] = bad
        _fit_expecting_value_error(estimator, X_bad, y, ("nan", "infinity", "inf"))
    _fit_expecting_value_error(estimator, X[:0], None if y is None else y[:0],
                               ("0 sample", "empty", "minimum of"))
    fitted = clone(estimator).fit(X, y)
    method = next(m for m in ("predict", "transform", "score_samples", "conditional", "sample")
                  if hasattr(fitted, m))
    bad_inputs = [
        (X[:, :-1], ("features", "n_features")),
        (X[0], ("2d", "2-d", "reshape", "dimension")),
    ]
    if not getattr(tags, "three_d_input", False):
        bad_inputs.append((X[:, :, None], ("dim", "3", "2d")))
    for bad, words in bad_inputs:
        try:
            getattr(fitted, method)(bad)
        except ValueError as exc:
            assert any(w in str(exc).lower() for w in words), (
                f"{method} on input of shape {bad.shape} raised {exc!r}, which does "
                f"not name the problem."
            )
        else:
            raise AssertionError(f"{method} accepted input of shape {bad.shape}.")


_CHECKS = (
    check_clone_refit,
    check_reproducible,
    check_pickle_and_joblib_roundtrip,
    check_in_pipeline,
    check_grid_search_n_jobs,
    check_rejects_bad_input,
)


def yield_skicml_checks(estimator):
    """Yield ``check(estimator)`` callables of skicml's common checks."""
    X, y = make_test_data(estimator)
    for check in _CHECKS:
        wrapped = partial(check, X=X, y=y)
        wrapped.__name__ = check.__name__
        yield wrapped
