"""TabICL input preprocessing and ensemble configuration (skicml.tabicl._encoding, _normalization, _ensemble)."""

import itertools
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.utils.estimator_checks import parametrize_with_checks

from skicml.tabicl._encoding import TransformToNumerical, UniqueFeatureFilter
from skicml.tabicl._ensemble import EnsembleGenerator, feature_permutations, latin_square_permutations
from skicml.tabicl._normalization import (
    NORM_METHODS,
    CustomStandardScaler,
    OutlierRemover,
    PreprocessingPipeline,
    PrincipalProjection,
    RTDLQuantileTransformer,
)

DETERMINISTIC_METHODS = ["none", "power", "robust", "quantile"]


def _data(n=80, h=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.lognormal(size=(n, h))
    X[:, 0] = rng.normal(size=n)
    X[:3, 1] = 40.0  # a few outliers
    return X


def _is_permutation(row, n):
    return row.shape == (n,) and np.array_equal(np.sort(row), np.arange(n))


# --------------------------------------------------------------------------
# OutlierRemover
# --------------------------------------------------------------------------
def test_outlier_bounds_are_two_stage():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 2))
    X[0, 0] = 1e3  # a gross outlier inflates the first-stage std
    remover = OutlierRemover(threshold=4.0).fit(X)
    mean1, std1 = X.mean(0), X.std(0, ddof=1)
    clean = np.where(np.abs(X - mean1) > 4 * std1, np.nan, X)
    mean2, std2 = np.nanmean(clean, 0), np.nanstd(clean, 0, ddof=1)
    assert np.isnan(clean[0, 0]) and not np.isnan(clean).any(axis=0)[1]
    assert_allclose(remover.lower_bounds_, mean2 - 4 * std2)
    assert_allclose(remover.upper_bounds_, mean2 + 4 * std2)
    # the outlier no longer widens the bounds of column 0
    assert remover.upper_bounds_[0] < 10 < mean1[0] + 4 * std1[0]


def test_outlier_single_row_and_constant_column():
    remover = OutlierRemover().fit(np.array([[3.0, 1.0]]))
    assert_allclose(remover.stds_, 1e-6)
    remover = OutlierRemover().fit(np.c_[np.ones(10), np.arange(10.0)])
    assert_allclose(remover.transform(np.ones((1, 2)))[0, 0], 1.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=30))
def test_soft_clipping_formula_identity_inside_and_monotone(values):
    rng = np.random.default_rng(0)
    remover = OutlierRemover(threshold=2.0).fit(rng.normal(size=(100, 1)))
    lower, upper = remover.lower_bounds_[0], remover.upper_bounds_[0]
    assert lower < 0 < upper
    x = np.sort(np.asarray(values))[:, None]
    out = remover.transform(x)
    step1 = np.maximum(lower - np.log1p(np.abs(x)), x)
    assert_allclose(out, np.minimum(upper + np.log1p(np.abs(step1)), step1))
    inside = (x >= lower) & (x <= upper)
    assert_array_equal(out[inside], x[inside])
    far_low = x < lower - np.log1p(np.abs(x))
    assert_allclose(out[far_low], (lower - np.log1p(np.abs(x)))[far_low])
    far_high = x > upper + np.log1p(np.abs(x))
    assert_allclose(out[far_high], (upper + np.log1p(np.abs(x)))[far_high])
    assert np.all(np.diff(out[:, 0]) >= 0)  # monotone because lower < 0 < upper


# --------------------------------------------------------------------------
# CustomStandardScaler
# --------------------------------------------------------------------------
def test_standard_scaler_formula_and_clip():
    X = _data()
    scaler = CustomStandardScaler().fit(X)
    assert_allclose(scaler.transform(X), (X - X.mean(0)) / (X.std(0) + 1e-6))
    far = np.full((2, X.shape[1]), 1e9)
    far[1] *= -1
    out = scaler.transform(far)
    assert_array_equal(out[0], 100.0)
    assert_array_equal(out[1], -100.0)
    const = CustomStandardScaler().fit(np.full((5, 1), 3.0))
    assert_array_equal(const.transform([[3.0], [4.0]]), [[0.0], [100.0]])


def test_standard_scaler_huge_values_stay_finite():
    X = np.random.default_rng(0).normal(size=(30, 2)) * 1e300
    scaler = CustomStandardScaler().fit(X)
    out = scaler.transform(X)
    assert np.isfinite(out).all() and np.abs(out).max() < 10


# --------------------------------------------------------------------------
# UniqueFeatureFilter
# --------------------------------------------------------------------------
def test_constant_columns_dropped_and_filter_reused():
    X = np.c_[np.arange(6.0), np.full(6, 2.0), np.tile([0.0, 1.0], 3), np.full(6, np.nan)]
    filt = UniqueFeatureFilter().fit(X)
    assert_array_equal(filt.features_to_keep_, [True, False, True, False])
    assert filt.n_features_out_ == 2
    X_test = np.random.default_rng(0).normal(size=(3, 4))  # test columns all vary
    assert_array_equal(filt.transform(X_test), X_test[:, [0, 2]])


def test_all_constant_columns_give_zero_features():
    filt = UniqueFeatureFilter().fit(np.ones((4, 3)))
    assert filt.n_features_out_ == 0
    assert filt.transform(np.zeros((2, 3))).shape == (2, 0)
    # official rule: with a single training row every column is kept
    assert UniqueFeatureFilter().fit(np.ones((1, 3))).n_features_out_ == 3


# --------------------------------------------------------------------------
# normalisers and pipeline
# --------------------------------------------------------------------------
@pytest.mark.parametrize("method", NORM_METHODS)
def test_pipeline_train_cache_and_finiteness(method):
    X = _data()
    pipe = PreprocessingPipeline(method, random_state=0).fit(X)
    assert pipe.X_transformed_.shape == X.shape
    if method != "quantile_rtdl":  # noise is added to the training data only in fit
        assert_allclose(pipe.transform(X), pipe.X_transformed_, atol=1e-10)
    wild = np.vstack([X[:3] * 1e6, -X[:3] * 1e6, np.full((1, X.shape[1]), 1e250)])
    assert np.isfinite(pipe.transform(wild)).all()


@pytest.mark.parametrize("method", DETERMINISTIC_METHODS)
def test_pipeline_train_row_permutation_invariance(method):
    X, X_test = _data(seed=2), _data(n=20, seed=3)
    perm = np.random.default_rng(4).permutation(len(X))
    a = PreprocessingPipeline(method, random_state=0).fit(X)
    b = PreprocessingPipeline(method, random_state=0).fit(X[perm])
    assert_allclose(a.transform(X_test), b.transform(X_test), atol=1e-7)
    assert_allclose(a.X_transformed_[perm], b.X_transformed_, atol=1e-7)


def test_quantile_rtdl_is_seeded():
    X = _data(n=300)
    out = [PreprocessingPipeline("quantile_rtdl", random_state=s).fit(X).X_transformed_ for s in (5, 5, 6)]
    assert_array_equal(out[0], out[1])
    assert not np.array_equal(out[0], out[2])
    rtdl = RTDLQuantileTransformer(random_state=0).fit(X)
    assert rtdl.normalizer_.n_quantiles_ == 10  # max(min(300 // 30, 1000), 10)


@pytest.mark.parametrize("method", NORM_METHODS)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_pipeline_tiny_training_sets(method, n):
    X = np.random.default_rng(n).normal(size=(n, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pipe = PreprocessingPipeline(method, random_state=0).fit(X)
        out = pipe.transform(np.random.default_rng(9).normal(size=(4, 3)) * 100)
    assert np.isfinite(pipe.X_transformed_).all() and np.isfinite(out).all()


def test_pipeline_rejects_unknown_method():
    with pytest.raises(ValueError, match="normalization"):
        PreprocessingPipeline("zscore").fit(_data())


# --------------------------------------------------------------------------
# feature permutations
# --------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**31 - 1))
def test_latin_square_property(n, seed):
    rows = latin_square_permutations(n, seed)
    square = np.stack(list(rows))
    assert square.shape == (n, n)
    for k in range(n):
        assert _is_permutation(square[k], n)  # each member sees every feature once
        assert _is_permutation(square[:, k], n)  # each feature once per position
    assert_array_equal(np.stack(list(latin_square_permutations(n, seed))), square)


def test_latin_square_one_feature():
    assert [list(r) for r in latin_square_permutations(1, 0)] == [[0]]
    assert [list(p) for p in feature_permutations(1, "latin", 32, 0)] == [[0]]


def test_latin_square_5000_features_is_latin():
    n = 5000
    rows = latin_square_permutations(n, 123)
    seen = np.zeros((n, n), dtype=bool)  # seen[position, feature]
    positions = np.arange(n)
    for m in range(n):
        row = rows[m]
        assert np.bincount(row, minlength=n).max() == 1
        seen[positions, row] = True
    assert seen.all()
    assert len(rows) == n and rows[-1].shape == (n,)


def test_other_shuffle_methods():
    assert [list(p) for p in feature_permutations(4, "none", 32, 0)] == [[0, 1, 2, 3]]
    assert [list(p) for p in feature_permutations(4, "latin", 1, 0)] == [[0, 1, 2, 3]]
    shifts = feature_permutations(4, "shift", 32, 0)
    assert [list(p) for p in shifts] == [[0, 1, 2, 3], [3, 0, 1, 2], [2, 3, 0, 1], [1, 2, 3, 0]]
    small = feature_permutations(3, "random", 32, 0)
    assert len(small) == 6 and len({tuple(p) for p in small}) == 6
    large = feature_permutations(8, "random", 5, 0)
    assert len(large) == 5 and all(_is_permutation(p, 8) for p in large)
    # latin falls back to random above max_features_for_latin
    wide = feature_permutations(4001, "latin", 3, 0)
    assert len(wide) == 3 and all(_is_permutation(p, 4001) for p in wide)
    with pytest.raises(ValueError, match="shuffle"):
        feature_permutations(3, "sorted", 4, 0)


# --------------------------------------------------------------------------
# TransformToNumerical
# --------------------------------------------------------------------------
def _mixed_frame(n=12):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({
        "num": rng.normal(size=n),
        "int": rng.integers(0, 5, n),
        "cat": pd.Categorical(rng.choice(["lo", "mid", "hi"], n)),
        "text": pd.Series(rng.choice(["b", "a", "c"], n), dtype="string"),
        "obj": pd.Series(rng.choice(["u", "v"], n), dtype=object),
        "flag": rng.integers(0, 2, n).astype(bool),
        "nflag": pd.array(rng.integers(0, 2, n).astype(bool), dtype="boolean"),
    })
    df.loc[[1, 4], "num"] = np.nan
    df.loc[2, "cat"] = np.nan
    df.loc[3, "text"] = pd.NA
    df.loc[5, "nflag"] = pd.NA
    return df


def test_mixed_dataframe_encoding():
    df = _mixed_frame()
    enc = TransformToNumerical().fit(df)
    out = enc.transform(df)
    assert out.dtype == np.float64 and out.shape == df.shape  # nothing dropped
    assert list(enc.get_feature_names_out()) == ["cat", "text", "obj", "nflag", "num", "int", "flag"]
    names = list(enc.get_feature_names_out())
    col = {name: out[:, k] for k, name in enumerate(names)}
    expected_cat = df["cat"].map({"hi": 0, "lo": 1, "mid": 2}).astype(float).fillna(-1)
    assert_array_equal(col["cat"], expected_cat)
    assert_array_equal(col["text"], df["text"].map({"a": 0, "b": 1, "c": 2}).astype(float).fillna(-1))
    assert col["nflag"][5] == -1 and set(col["nflag"]) <= {-1.0, 0.0, 1.0}
    assert_allclose(col["num"][[1, 4]], df["num"].mean())
    assert_array_equal(col["int"], df["int"])
    assert_array_equal(col["flag"], df["flag"].astype(float))
    assert enc.feature_names_in_.tolist() == list(df.columns)


def test_integer_column_names_and_unseen_category():
    df = _mixed_frame()
    df.columns = range(df.shape[1])
    enc = TransformToNumerical().fit(df)
    assert not hasattr(enc, "feature_names_in_")
    test = df.iloc[:3].copy()
    test[3] = pd.Series(["zzz", "a", None], dtype="string", index=test.index)
    test[2] = pd.Categorical(["new", "hi", None])
    out = enc.transform(test)
    k_text, k_cat = list(enc.column_order_).index(3), list(enc.column_order_).index(2)
    assert_array_equal(out[:, k_text], [-1, 0, -1])
    assert_array_equal(out[:, k_cat], [-1, 0, -1])


def test_all_nan_columns():
    df = pd.DataFrame({"x": np.arange(5.0), "empty": np.nan, "c": ["a", "b", "a", "b", None]})
    enc = TransformToNumerical().fit(df)  # upstream #147
    out = enc.transform(df)
    assert out.shape == (5, 3) and np.isfinite(out).all()
    assert_array_equal(out[:, list(enc.get_feature_names_out()).index("empty")], 0.0)
    batch = pd.DataFrame({"x": [1.0, 2.0], "empty": [np.nan, 7.0], "c": [np.nan, np.nan]})  # upstream #143
    out = enc.transform(batch)
    assert_array_equal(out[:, 0], [-1, -1])
    assert_array_equal(out[:, 2], [0.0, 7.0])


def test_numpy_object_array_with_strings_and_lists():
    X = np.array([[1.5, "red", None], [2.5, "blue", 3], [np.nan, None, 4]], dtype=object)  # upstream #123
    enc = TransformToNumerical().fit(X)
    assert enc.column_kinds_ == ["numeric", "categorical", "numeric"]
    # None is a category of its own, sorted last (scikit-learn's OrdinalEncoder rule)
    assert_allclose(enc.transform(X), [[1, 1.5, 3.5], [0, 2.5, 3], [2, 2.0, 4]])
    assert_allclose(enc.transform(np.array([[np.nan, np.nan, np.nan]], dtype=object)), [[-1, 2.0, 3.5]])
    assert_array_equal(TransformToNumerical().fit_transform([[1, "a"], [2, "b"]]), [[0, 1], [1, 2]])
    numeric = np.random.default_rng(0).normal(size=(4, 3))
    assert_array_equal(TransformToNumerical().fit_transform(numeric), numeric)  # order kept


def test_datetime_and_mixed_type_columns_are_kept():
    df = pd.DataFrame({
        "when": pd.to_datetime(["2020-01-01", None, "2020-01-03"]),
        "mixed": pd.Series(["a", 1, 2.5], dtype=object),  # scikit-learn's encoder raises here
    })
    enc = TransformToNumerical().fit(df)
    out = enc.transform(df)
    assert out.shape == (3, 2) and enc.column_kinds_ == ["datetime", "categorical"]
    assert sorted(out[:, 0]) == [0.0, 1.0, 2.0]
    assert_allclose(out[:, 1], [86400.0 * 18262, 86400.0 * 18263, 86400.0 * 18264])


def test_infinite_values_rejected_with_column_name():
    df = pd.DataFrame({"ok": [1.0, 2.0], "bad col": [1.0, np.inf]})
    with pytest.raises(ValueError, match="bad col"):
        TransformToNumerical().fit(df)
    enc = TransformToNumerical().fit(df.assign(**{"bad col": [1.0, 2.0]}))
    with pytest.raises(ValueError, match="bad col.*infinite"):
        enc.transform(pd.DataFrame({"ok": [1.0], "bad col": [-np.inf]}))
    with pytest.raises(ValueError, match="position 1"):
        TransformToNumerical().fit(np.array([[0.0, np.inf]]))


def test_transform_to_numerical_pickles():
    df = _mixed_frame()
    enc = TransformToNumerical().fit(df)
    assert_array_equal(pickle.loads(pickle.dumps(enc)).transform(df), enc.transform(df))


# --------------------------------------------------------------------------
# EnsembleGenerator
# --------------------------------------------------------------------------
def _iris_like(n=60, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 4)), np.arange(n) % 3


def test_ensemble_counts_and_method_fastest_order():
    X, y = _iris_like()
    gen = EnsembleGenerator(n_estimators=32, random_state=0).fit(X, y)
    assert gen.n_estimators_ == 24  # 4 latin permutations x 3 offsets x 2 methods
    triples = {(m, tuple(p), o) for m, p, o in gen.configs_}
    assert len(triples) == 24
    for t in range(0, 24, 2):
        (m0, p0, o0), (m1, p1, o1) = gen.configs_[t], gen.configs_[t + 1]
        assert (m0, m1) == ("none", "power") and o0 == o1 and np.array_equal(p0, p1)
    assert list(gen.members_by_method_) == ["none", "power"]
    assert_array_equal(gen.members_by_method_["none"], np.arange(0, 24, 2))
    for method, idx in gen.members_by_method_.items():
        assert_array_equal(gen.shuffle_patterns_[method], np.stack([gen.configs_[i][1] for i in idx]))
        assert_array_equal(gen.class_offsets_[method], [gen.configs_[i][2] for i in idx])
    # fewer members requested: keep the first ones of the same drawing
    first = EnsembleGenerator(n_estimators=5, random_state=0).fit(X, y)
    for a, b in zip(first.configs_, gen.configs_[:5]):
        assert a[0] == b[0] and a[2] == b[2] and np.array_equal(a[1], b[1])


def test_ensemble_class_offsets_and_labels():
    X, y = _iris_like()
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    gen = EnsembleGenerator(n_estimators=32, random_state=1).fit(X, labels)
    assert_array_equal(gen.classes_, ["setosa", "versicolor", "virginica"])
    assert_array_equal(gen.y_train_, y)
    assert sorted(gen.class_offsets_drawn_) == [0, 1, 2]
    for i, (_, _, offset) in enumerate(gen.configs_):
        assert_array_equal(gen.y_members_[i], (y + offset) % 3)
    no_shift = EnsembleGenerator(n_estimators=32, class_shift=False, random_state=1).fit(X, y)
    assert no_shift.n_estimators_ == 8 and {o for _, _, o in no_shift.configs_} == {0}
    single = EnsembleGenerator(n_estimators=1, random_state=1).fit(X, y)
    (method, perm, offset), = single.configs_
    assert method == "none" and offset == 0 and list(perm) == [0, 1, 2, 3]
    assert list(single.X_train_) == ["none"]  # only used methods are fitted


def test_ensemble_is_deterministic_and_seed_dependent():
    X, y = _iris_like()

    def configs(seed):
        gen = EnsembleGenerator(n_estimators=16, norm_methods=["power", "robust"], random_state=seed).fit(X, y)
        return [(m, tuple(p), o) for m, p, o in gen.configs_]

    assert configs(3) == configs(3)
    assert any(configs(3) != configs(s) for s in (4, 5, 6))


def test_ensemble_data_layout():
    X, y = _iris_like()
    X = np.c_[X, np.ones(len(X))]  # a constant column is filtered out
    X_test = np.random.default_rng(5).normal(size=(7, 5))
    gen = EnsembleGenerator(n_estimators=8, norm_methods="quantile", random_state=0).fit(X, y)
    assert gen.n_features_in_ == 5 and gen.n_features_out_ == 4
    out = gen.transform(X_test)
    assert list(out) == list(gen.X_train_) == ["quantile"]
    assert gen.X_train_["quantile"].shape == (60, 4) and gen.X_train_["quantile"].dtype == np.float32
    assert out["quantile"].shape == (7, 4) and out["quantile"].dtype == np.float32
    expected = gen.preprocessors_["quantile"].transform(X_test[:, :4]).astype(np.float32)
    assert_array_equal(out["quantile"], expected)


def test_ensemble_with_all_constant_features():
    gen = EnsembleGenerator(n_estimators=8, random_state=0).fit(np.ones((6, 3)), [0, 1, 2, 0, 1, 2])
    assert gen.n_features_out_ == 0 and gen.n_estimators_ == 6
    assert all(v.shape == (6, 0) for v in gen.X_train_.values())
    assert all(v.shape == (2, 0) for v in gen.transform(np.zeros((2, 3))).values())


def test_ensemble_rejects_bad_parameters():
    X, y = _iris_like()
    for kwargs in ({"n_estimators": 0}, {"norm_methods": ["bogus"]}, {"feat_shuffle_method": "sorted"}):
        with pytest.raises(ValueError):
            EnsembleGenerator(**kwargs).fit(X, y)


# --------------------------------------------------------------------------
# scikit-learn conventions
# --------------------------------------------------------------------------
@parametrize_with_checks([
    TransformToNumerical(), UniqueFeatureFilter(), CustomStandardScaler(), OutlierRemover(),
    PreprocessingPipeline(), RTDLQuantileTransformer(random_state=0), PrincipalProjection(n_components=3),
])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


# --------------------------------------------------------------------------
# parity with the official tabicl==0.1.4
# --------------------------------------------------------------------------
def test_parity_with_official_tabicl():
    official = pytest.importorskip("tabicl.sklearn.preprocessing", reason="parity needs tabicl==0.1.4")
    rng = np.random.default_rng(11)
    X = _data(n=150, h=6, seed=11)
    X[:, 2] = rng.integers(0, 4, len(X))
    X_test = _data(n=25, h=6, seed=12) * 3
    for method in NORM_METHODS:
        ours = PreprocessingPipeline(method, 4.0, 42).fit(X)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = official.PreprocessingPipeline(method, 4.0, 42)
            theirs.fit(X)
            theirs_test = theirs.transform(X_test)
        assert_allclose(ours.X_transformed_, theirs.X_transformed_, rtol=1e-12, atol=1e-12, err_msg=method)
        assert_allclose(ours.transform(X_test), theirs_test, rtol=1e-12, atol=1e-12, err_msg=method)

    for n, seed, method in itertools.product([1, 2, 5, 9, 31], [0, 7], ["latin", "shift", "random", "none"]):
        theirs = official.FeatureShuffler(n, method, random_state=seed).shuffle(6)
        ours = feature_permutations(n, method, 6, seed)
        assert [list(p) for p in ours] == [list(p) for p in theirs], (n, seed, method)

    y = rng.integers(0, 3, len(X))
    settings_list = [
        {"n_estimators": 32},
        {"n_estimators": 7, "norm_methods": ["power", "none", "robust"]},
        {"n_estimators": 32, "feat_shuffle_method": "shift", "norm_methods": ["quantile"]},
        {"n_estimators": 10, "feat_shuffle_method": "random", "class_shift": False},
    ]
    for kwargs in settings_list:
        ours = EnsembleGenerator(random_state=42, **kwargs).fit(X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = official.EnsembleGenerator(random_state=42, **kwargs).fit(X, y)
            theirs_data = theirs.transform(X_test)
        assert set(theirs.ensemble_configs_) == set(ours.members_by_method_)
        ours_test = ours.transform(X_test)
        for method, configs in theirs.ensemble_configs_.items():
            idx = ours.members_by_method_[method]
            assert [(list(p), o) for p, o in configs] == [
                (list(ours.configs_[i][1]), ours.configs_[i][2]) for i in idx
            ], kwargs
            X_ens, y_ens = theirs_data[method]
            full = np.concatenate([ours.X_train_[method], ours_test[method]])
            for k, i in enumerate(idx):
                assert_array_equal(X_ens[k].astype(np.float32), full[:, ours.configs_[i][1]])
                assert_array_equal(y_ens[k], ours.y_members_[i])

    df = _mixed_frame(40).drop(columns="flag")  # the official encoder drops NumPy bool columns
    # the official encoder crashes on pd.NA in a "string" column; use pandas' default str dtype (NaN)
    df["text"] = pd.Series(df["text"].to_numpy(dtype=object, na_value=np.nan).tolist(), index=df.index)
    df["obj"] = df["obj"].astype(object)
    df.loc[7, "obj"] = None
    test = df.iloc[:10].copy()
    test.loc[test.index[0], "text"] = "unseen"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = official.TransformToNumerical().fit(df).transform(test)
    assert_array_equal(TransformToNumerical().fit(df).transform(test), theirs)


# --------------------------------------------------------------------------
# PrincipalProjection and the principal view of the ensemble
# --------------------------------------------------------------------------
def test_principal_projection_one_hot_encodes_categories():
    rng = np.random.default_rng(0)
    codes = rng.integers(-1, 3, size=(80, 1)).astype(float)  # -1 is the missing category
    X = np.c_[codes, rng.normal(size=(80, 2))]
    proj = PrincipalProjection(n_components=10, categorical_features=[True, False, False]).fit(X)
    assert proj.encoder_.categories_[0].tolist() == [-1, 0, 1, 2]
    # 4 one-hot columns + 2 numeric ones, one direction lost to the one-hot sum
    assert proj.n_components_ == 5
    Z = proj.transform(X)
    assert Z.shape == (80, 5)
    assert_allclose(Z.mean(0), 0, atol=1e-12)
    assert np.all(np.diff(Z.var(0)) <= 1e-12)  # leading components first
    # an unseen category code is encoded as all zeros, not an error
    assert np.isfinite(proj.transform(np.array([[7.0, 0.0, 0.0]]))).all()


def test_principal_projection_of_a_constant_table_is_empty():
    proj = PrincipalProjection(n_components=4).fit(np.ones((10, 3)))
    assert proj.n_components_ == 0 and proj.transform(np.ones((2, 3))).shape == (2, 0)


def test_ensemble_principal_view_layout():
    X, y = _iris_like()
    X = np.c_[X, np.ones(len(X))]  # filtered before the projection
    X_test = np.random.default_rng(5).normal(size=(7, 5))
    gen = EnsembleGenerator(n_estimators=8, random_state=0, pca_components=3).fit(X, y)
    assert [m for m, _, _ in gen.configs_] == ["none", "power", "pca:none", "pca:power"] * 2
    assert list(gen.X_train_) == ["none", "power", "pca:none", "pca:power"]
    assert gen.X_train_["pca:none"].shape == (60, 3) and gen.shuffle_patterns_["pca:none"].shape == (2, 3)
    out = gen.transform(X_test)
    assert list(out) == list(gen.X_train_)
    expected = gen.preprocessors_["pca:power"].transform(gen.projection_.transform(X_test[:, :4]))
    assert_array_equal(out["pca:power"], expected.astype(np.float32))
    # the raw members are the official draw, the principal view only adds members
    raw = EnsembleGenerator(n_estimators=4, random_state=0).fit(X, y)
    raw_members = [c for c in gen.configs_ if not c[0].startswith("pca:")]
    for a, b in zip(raw.configs_, raw_members):
        assert a[0] == b[0] and a[2] == b[2] and np.array_equal(a[1], b[1])


def test_ensemble_principal_view_needs_a_varying_column():
    gen = EnsembleGenerator(n_estimators=8, random_state=0, pca_components=4).fit(np.ones((6, 3)), [0, 1, 2] * 2)
    assert gen.projection_ is None and all(not m.startswith("pca:") for m, _, _ in gen.configs_)


def test_ensemble_rejects_mismatched_categorical_mask():
    X, y = _iris_like()
    with pytest.raises(ValueError, match="categorical_features has 2 entries for 4 columns"):
        EnsembleGenerator(pca_components=2, categorical_features=[True, False]).fit(X, y)
