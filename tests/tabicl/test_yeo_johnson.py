"""The joint Yeo-Johnson fit equals scikit-learn's PowerTransformer."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.preprocessing import PowerTransformer
from sklearn.utils.estimator_checks import parametrize_with_checks

from skicml.tabicl._yeo_johnson import YeoJohnsonTransformer, yeo_johnson


def _column(kind, n, rng):
    if kind == "normal":
        return rng.normal(size=n) * rng.uniform(0.1, 10) + rng.uniform(-5, 5)
    if kind == "lognormal":
        return rng.lognormal(size=n) * rng.uniform(0.01, 100)
    if kind == "negative":
        return -rng.exponential(size=n)
    if kind == "heavy":
        return rng.standard_t(1.5, size=n) * 10
    if kind == "integers":
        return rng.integers(0, 3, size=n).astype(float)
    if kind == "constant":
        return np.full(n, rng.uniform(-3, 3))
    return np.zeros(n)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(2, 600),
       kinds=st.lists(st.sampled_from(["normal", "lognormal", "negative", "heavy", "integers", "constant", "zeros"]),
                      min_size=1, max_size=6))
def test_equals_power_transformer(seed, n, kinds):
    rng = np.random.default_rng(seed)
    X = np.column_stack([_column(kind, n, rng) for kind in kinds])
    with np.errstate(all="ignore"):
        reference = PowerTransformer(method="yeo-johnson", standardize=True).fit(X)
        expected = reference.transform(X)
    ours = YeoJohnsonTransformer().fit(X)
    np.testing.assert_allclose(ours.lambdas_, reference.lambdas_, rtol=1e-9, atol=1e-9)
    # A column the fitted lambda maps to one value up to rounding (two close
    # points and an extreme lambda) standardises rounding noise: no reference.
    transformed = yeo_johnson(X, ours.lambdas_)
    spread = transformed.std(axis=0)
    assume(np.all((spread == 0) | (spread > 1e-10 * np.maximum(1.0, np.abs(transformed).max(axis=0)))))
    np.testing.assert_allclose(ours.transform(X), expected, rtol=1e-7, atol=1e-7)
    X_new = X + rng.normal(size=X.shape)
    np.testing.assert_allclose(ours.transform(X_new), reference.transform(X_new), rtol=1e-7, atol=1e-7)


def test_transform_matches_scipy_at_the_special_lambdas():
    from scipy import stats

    x = np.linspace(-3, 3, 41)
    for lam in (-1.5, 0.0, 0.5, 1.0, 2.0, 3.0):
        np.testing.assert_allclose(yeo_johnson(x[:, None], [lam])[:, 0], stats.yeojohnson(x, lmbda=lam), atol=1e-12)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="NaN"):
        YeoJohnsonTransformer().fit(np.array([[1.0], [np.nan]]))
    fitted = YeoJohnsonTransformer().fit(np.arange(12.0).reshape(6, 2))
    with pytest.raises(ValueError, match="features"):
        fitted.transform(np.zeros((2, 3)))


@parametrize_with_checks([YeoJohnsonTransformer()])
def test_sklearn_compatible(estimator, check):
    check(estimator)
