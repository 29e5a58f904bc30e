"""TabICLRegressor: targets, outputs, the fit-time cache, the ensemble and persistence.

Most tests use ``pretrained=None`` (a small random v2 regression network):
what they check is exact mechanics that hold for any weights.
"""

import pickle

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.model_selection import GridSearchCV

from skicml import TabICLRegressor
from skicml.tabicl import TabICLClassifier

RANDOM = dict(pretrained=None, n_estimators=2, random_state=0, device="cpu", inference_precision="float64")


def _data(n=60, n_features=4, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, n_features))
    y = X @ rng.normal(size=n_features) + 0.1 * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def fitted():
    X, y = _data()
    return TabICLRegressor(**RANDOM).fit(X[:40], y[:40]), X[40:]


def test_outputs_have_the_documented_shapes_and_order(fitted):
    reg, X = fitted
    mean = reg.predict(X)
    assert mean.shape == (20,) and np.isfinite(mean).all()
    quantiles = reg.predict(X, output="quantiles", alphas=[0.1, 0.5, 0.9])
    assert quantiles.shape == (20, 3)
    assert (np.diff(quantiles, axis=1) >= 0).all()
    mean2, std = reg.predict(X, output="mean_std")
    np.testing.assert_allclose(mean2, mean)
    assert (std >= 0).all()
    raw = reg.predict(X, output="raw_quantiles")
    assert raw.shape == (20, reg.model_.num_quantiles)
    both = reg.predict(X, output=["median", "mean"])
    assert set(both) == {"median", "mean"}
    np.testing.assert_allclose(both["median"], reg.predict(X, output="quantiles", alphas=[0.5])[:, 0])


def test_predictions_are_affine_equivariant_in_the_target():
    # The target is standardised inside, so y -> a*y + b maps every output the same way.
    X, y = _data()
    base = TabICLRegressor(**RANDOM).fit(X[:40], y[:40])
    moved = TabICLRegressor(**RANDOM).fit(X[:40], 7.5 * y[:40] - 3.0)
    np.testing.assert_allclose(moved.predict(X[40:]), 7.5 * base.predict(X[40:]) - 3.0, rtol=1e-7, atol=1e-7)
    q, q_moved = (r.predict(X[40:], output="quantiles") for r in (base, moved))
    np.testing.assert_allclose(q_moved, 7.5 * q - 3.0, rtol=1e-7, atol=1e-7)


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 19))
def test_a_row_is_predicted_the_same_alone_or_with_others(fitted, row):
    reg, X = fitted
    np.testing.assert_allclose(reg.predict(X[row:row + 1]), reg.predict(X)[row:row + 1], rtol=1e-9, atol=1e-9)


def test_cache_changes_cost_not_results():
    X, y = _data()
    cached = TabICLRegressor(cache=True, **RANDOM).fit(X[:40], y[:40])
    uncached = TabICLRegressor(cache=False, **RANDOM).fit(X[:40], y[:40])
    assert cached.context_.cached and not uncached.context_.cached
    np.testing.assert_allclose(cached.predict(X[40:], output="raw_quantiles"),
                               uncached.predict(X[40:], output="raw_quantiles"), rtol=1e-9, atol=1e-9)


def test_batch_size_bounds_memory_not_results():
    X, y = _data()
    one = TabICLRegressor(batch_size=1, **{**RANDOM, "n_estimators": 4}).fit(X[:40], y[:40])
    all_ = TabICLRegressor(batch_size=None, **{**RANDOM, "n_estimators": 4}).fit(X[:40], y[:40])
    np.testing.assert_allclose(one.predict(X[40:]), all_.predict(X[40:]), rtol=1e-9, atol=1e-9)


def test_dataframes_with_categories_strings_and_missing_values():
    rng = np.random.RandomState(0)
    frame = pd.DataFrame({
        "size": rng.normal(size=50),
        "colour": pd.Categorical(rng.choice(["red", "blue", "green"], 50)),
        "city": rng.choice(["Paris", "Lyon"], 50).astype(object),
        "age": np.where(rng.rand(50) < 0.2, np.nan, rng.uniform(20, 60, 50)),
    })
    y = frame["size"].to_numpy() * 2 + (frame["colour"] == "red") + rng.normal(scale=0.1, size=50)
    reg = TabICLRegressor(**RANDOM).fit(frame.iloc[:40], y[:40])
    assert np.isfinite(reg.predict(frame.iloc[40:])).all()
    assert list(reg.feature_names_in_) == ["size", "colour", "city", "age"]


@pytest.mark.parametrize("y, message", [
    (np.r_[np.nan, np.ones(9)], "NaN"),
    (np.r_[np.inf, np.arange(9.0)], "infinite"),
    (np.full(10, 3.0), "constant"),
    (np.ones((10, 2)), "1-D"),
    (np.array(list("abcdefghij"), dtype=object), "numeric"),
    (np.arange(9.0), "rows but y has 9"),
])
def test_bad_targets_get_clear_errors(y, message):
    X, _ = _data(n=10)
    with pytest.raises(ValueError, match=message):
        TabICLRegressor(**RANDOM).fit(X, y)


def test_bad_outputs_and_levels_get_clear_errors(fitted):
    reg, X = fitted
    with pytest.raises(ValueError, match="output must be one of"):
        reg.predict(X, output="mode")
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        reg.predict(X, output="quantiles", alphas=[0.0, 0.5])


def test_a_classification_checkpoint_is_refused_with_a_reason():
    X, y = _data(n=20)
    with pytest.raises(ValueError, match="classification network"):
        TabICLRegressor(pretrained="tabicl-small", model_path=None, n_estimators=1).fit(X, y)


def test_only_constant_columns_predict_the_target_distribution():
    X = np.ones((30, 3))
    y = np.arange(30.0)
    reg = TabICLRegressor(**RANDOM).fit(X, y)
    np.testing.assert_allclose(reg.predict(X[:2]), [14.5, 14.5])
    np.testing.assert_allclose(reg.predict(X[:1], output="quantiles", alphas=[0.5]), [[14.5]])


def test_pickle_and_grid_search(fitted):
    reg, X = fitted
    clone = pickle.loads(pickle.dumps(reg))
    np.testing.assert_allclose(clone.predict(X), reg.predict(X), rtol=1e-12)
    X_all, y_all = _data()
    search = GridSearchCV(TabICLRegressor(**{k: v for k, v in RANDOM.items() if k != "n_estimators"}),
                          {"n_estimators": [1, 2]}, cv=2).fit(X_all, y_all)
    assert search.best_params_["n_estimators"] in (1, 2)


def test_the_shipped_model_beats_the_training_mean():
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    reg = TabICLRegressor(n_estimators=2, random_state=0, device="cpu").fit(X[:256], y[:256])
    mse = np.mean((reg.predict(X[256:]) - y[256:]) ** 2)
    assert mse < 0.8 * np.var(y[256:])
    low, high = reg.predict(X[256:], output="quantiles", alphas=[0.1, 0.9]).T
    assert 0.5 < np.mean((y[256:] >= low) & (y[256:] <= high)) <= 1.0


def test_classifier_is_untouched_by_the_shared_base():
    X, y = _data(n=30)
    clf = TabICLClassifier(n_estimators=1, random_state=0, device="cpu").fit(X, y > 0)
    assert clf.predict_proba(X[:3]).shape == (3, 2)


# -- issue 64 ------------------------------------------------------------------
@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e200, 1e300])
def test_targets_of_extreme_scale_are_rescaled_not_lost(scale):
    # The target's standardisation squared 1e-300 to 0 and 1e200 to inf: NaN / inf predictions.
    X, y = _data()
    base = TabICLRegressor(**RANDOM).fit(X[:40], y[:40])
    scaled = TabICLRegressor(**RANDOM).fit(X[:40], scale * y[:40])
    assert np.isfinite(scaled.y_scale_) and scaled.y_scale_ > 0
    for output in ("mean", "median"):
        pred = scaled.predict(X[40:], output=output)
        assert np.isfinite(pred).all()
        np.testing.assert_allclose(pred / scale, base.predict(X[40:], output=output), rtol=1e-6)
    mean, std = scaled.predict(X[40:], output="mean_std")
    assert np.isfinite(std).all() and (std > 0).all()


def test_constant_columns_with_a_target_of_extreme_scale():
    reg = TabICLRegressor(**RANDOM).fit(np.ones((30, 2)), 1e200 * np.arange(30.0))
    mean, std = reg.predict(np.ones((2, 2)), output="mean_std")
    np.testing.assert_allclose(mean, 14.5e200)
    assert np.isfinite(std).all()


def test_numeric_strings_in_an_array_are_read_as_numbers_with_a_warning():
    X, y = _data()
    strings = X.astype(str).astype(object)
    floats = TabICLRegressor(**RANDOM).fit(X[:40], y[:40])
    with pytest.warns(UserWarning, match="numbers written as strings.*read as numbers"):
        from_strings = TabICLRegressor(**RANDOM).fit(strings[:40], y[:40])
    expected = floats.predict(X[40:])
    np.testing.assert_allclose(from_strings.predict(strings[40:]), expected, rtol=1e-6)
    # Fit on strings, predict on floats (and the other way round): the same model, not one constant.
    np.testing.assert_allclose(from_strings.predict(X[40:]), expected, rtol=1e-6)
    np.testing.assert_allclose(floats.predict(strings[40:]), expected, rtol=1e-6)
    # A unicode array reads the same.
    with pytest.warns(UserWarning, match="numbers written as strings"):
        unicode = TabICLRegressor(**RANDOM).fit(X[:40].astype(str), y[:40])
    np.testing.assert_allclose(unicode.predict(X[40:]), expected, rtol=1e-6)


def test_numeric_strings_in_a_dataframe_column_keep_its_dtype_with_a_warning():
    X, y = _data(n=30)
    frame = pd.DataFrame({"a": X[:, 0], "code": np.round(X[:, 1]).astype(int).astype(str).astype(object)})
    with pytest.warns(UserWarning, match="'code'.*numbers written as strings.*categories"):
        reg = TabICLRegressor(**RANDOM).fit(frame, y)
    assert reg.encoder_.column_kinds_ == ["numeric", "categorical"]
    # A 'category' dtype says so on purpose: no warning.
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TabICLRegressor(**RANDOM).fit(frame.astype({"code": "category"}), y)


def test_a_dataframe_at_fit_and_an_array_at_predict_warns_once_in_the_users_terms(fitted):
    import warnings
    X, y = _data()
    frame = pd.DataFrame(X, columns=list("abcd"))
    for estimator, target in ((TabICLRegressor(**RANDOM), y), (TabICLClassifier(**RANDOM), y > 0)):
        estimator.fit(frame[:40], target[:40])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            estimator.predict(X[40:])
        messages = [str(w.message) for w in caught]
        assert len(messages) == 1, messages
        assert type(estimator).__name__ in messages[0] and "TransformToNumerical" not in messages[0]


def test_a_corrupt_checkpoint_is_named_without_torchs_unsafe_advice(tmp_path):
    X, y = _data(n=20)
    for content in (b"garbage" * 10, b""):
        path = tmp_path / "model.ckpt"
        path.write_bytes(content)
        with pytest.raises(ValueError, match="not a valid .*checkpoint") as info:
            TabICLRegressor(pretrained=str(path), n_estimators=1).fit(X, y)
        text = str(info.value) + "".join(str(e) for e in (info.value.__cause__, info.value.__context__) if e)
        assert "weights_only" not in text and str(path) in str(info.value)
