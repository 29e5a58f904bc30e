"""Input preprocessing and ensemble configuration of the TabICL classifier.

The numerics follow the official ``tabicl`` v0.1.4 implementation
(``tabicl/sklearn/preprocessing.py``) so that an official checkpoint sees the
same inputs and gives the same predictions, with its known robustness bugs
fixed:

* :class:`TransformToNumerical` turns any table (NumPy, lists, pandas with
  numeric / categorical / string / boolean / datetime columns and missing
  values) into a float64 matrix. Unlike v0.1.x it never drops a column, keeps
  all-NaN columns (upstream #147, #143), encodes NumPy object arrays holding
  strings (#123) and accepts integer column names (#2).
* :class:`UniqueFeatureFilter` removes columns that are constant on the
  training rows.
* :class:`CustomStandardScaler`, :class:`RTDLQuantileTransformer`,
  :class:`OutlierRemover` and :class:`PreprocessingPipeline` are the
  per-normalisation-method pipeline (scale, normalise, soft-clip outliers).
* :class:`PrincipalProjection` gives skicml's second view of a table: its
  leading principal components (categoricals one-hot encoded first).
* :func:`latin_square_permutations` and :func:`feature_permutations` give the
  column orders of the ensemble members; the Latin square is built without
  recursion (upstream #9) and is lazy, so thousands of features are cheap.
* :class:`EnsembleGenerator` draws the ensemble members (normalisation
  method, column permutation, class offset) exactly as the official
  ``_generate_ensemble`` does for the same integer ``random_state`` and caches
  the transformed training matrix per normalisation method; with
  ``pca_components`` every other group of members sees the principal view.
"""

from __future__ import annotations

import itertools
import numbers
import operator
import random
import warnings
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, QuantileTransformer, RobustScaler, StandardScaler
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ._yeo_johnson import YeoJohnsonTransformer

__all__ = [
    "NORM_METHODS",
    "SHUFFLE_METHODS",
    "CustomStandardScaler",
    "EnsembleGenerator",
    "OutlierRemover",
    "PreprocessingPipeline",
    "PrincipalProjection",
    "RTDLQuantileTransformer",
    "TransformToNumerical",
    "UniqueFeatureFilter",
    "feature_permutations",
    "latin_square_permutations",
]

#: Normalisation methods understood by :class:`PreprocessingPipeline`.
NORM_METHODS = ("none", "power", "quantile", "quantile_rtdl", "robust")
#: Column-permutation strategies understood by :func:`feature_permutations`.
SHUFFLE_METHODS = ("none", "shift", "random", "latin")
#: Key prefix of the ensemble members that see the principal-component view.
PCA_VIEW = "pca:"


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------
def _resolve_seed(random_state):
    """Return an ``int`` seed for ``random_state``.

    An integer is returned unchanged, so the official v0.1.4 streams (which
    seed :class:`random.Random` and :func:`numpy.random.default_rng` with the
    integer itself) are reproduced exactly. ``None`` and a
    :class:`numpy.random.RandomState` draw a seed the scikit-learn way (from
    the global NumPy stream, respectively from the given instance), and a
    :class:`numpy.random.Generator` draws one from itself.
    """
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, (bool, np.bool_)):
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**31 - 1))
    if random_state is None or isinstance(random_state, np.random.RandomState):
        return int(check_random_state(random_state).randint(0, 2**31 - 1))
    raise ValueError(
        f"random_state must be None, an int, a numpy RandomState or Generator; got {random_state!r}."
    )


def _python_rng(random_state):
    """A :class:`random.Random` for ``random_state`` (an instance is used as is)."""
    if isinstance(random_state, random.Random):
        return random_state
    return random.Random(_resolve_seed(random_state))


def _column_label(labels, j):
    if labels is None:
        return f"at position {j}"
    return f"{labels[j]!r} (position {j})"


def _safe_nanmean(values):
    """Mean of the non-NaN entries of a 1-D float array, without warnings or overflow.

    Summed with the missing entries set to zero, as ``np.nanmean`` and
    scikit-learn's ``SimpleImputer`` do (same rounding). Returns ``nan`` when
    every value is missing.
    """
    missing = np.isnan(values)
    count = values.size - int(missing.sum())
    if count == 0:
        return np.nan
    filled = np.where(missing, 0.0, values)
    with np.errstate(over="ignore", invalid="ignore"):
        mean = np.sum(filled) / count
    if not np.isfinite(mean):  # the sum overflowed: average in a rescaled unit
        scale = np.max(np.abs(filled))
        mean = scale * (np.sum(filled / scale) / count)
    return float(mean)


def _sort_categories(values):
    """Sorted distinct values, as scikit-learn's ``OrdinalEncoder`` orders them.

    ``None`` is a category of its own sorted last (scikit-learn, hence the
    official encoder, treats only NaN as missing). Columns mixing types that
    do not compare (``"a"`` and ``1``) make scikit-learn raise; they are
    ordered by (type name, repr) instead.
    """
    distinct = set(values)
    has_none = None in distinct
    distinct.discard(None)
    try:
        ordered = sorted(distinct)
    except TypeError:
        ordered = sorted(distinct, key=lambda v: (type(v).__name__, repr(v)))
    return ordered + [None] if has_none else ordered


def _category_missing(values):
    """Missing entries of a 1-D object array that get the code -1.

    NaN, ``pd.NA`` and ``NaT`` are missing; ``None`` is not (see
    :func:`_sort_categories`).
    """
    missing = np.asarray(pd.isna(values), dtype=bool)
    if missing.any():
        missing[missing] = [v is not None for v in values[missing].tolist()]
    return missing


def _object_to_float(values, label):
    """Convert a 1-D object array of numbers / numeric strings / missing to float64."""
    values = np.asarray(values, dtype=object)
    missing = np.asarray(pd.isna(values), dtype=bool)
    out = np.full(values.shape[0], np.nan)
    if (~missing).any():
        try:
            out[~missing] = np.asarray(values[~missing].tolist(), dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"Column {label} was numeric during fit but holds non-numeric values: {exc}") from exc
    return out


def _is_number(value):
    return isinstance(value, (numbers.Real, np.bool_)) and not isinstance(value, (str, bytes))


# --------------------------------------------------------------------------
# 1. any table -> float matrix
# --------------------------------------------------------------------------
class TransformToNumerical(TransformerMixin, BaseEstimator):
    """Encode a table of mixed column types as a float64 matrix.

    Each input column gives exactly one output column (nothing is dropped):

    * categorical columns -- pandas ``category``, ``object``, string
      (including :class:`pandas.StringDtype`), nullable ``boolean``, and
      columns of a NumPy array holding strings -- become ordinal codes
      ``0 .. n_categories - 1`` following the sorted categories seen in
      ``fit`` (as scikit-learn's ``OrdinalEncoder``); missing values (NaN,
      ``pd.NA``, ``NaT``) and categories unseen in ``fit`` become ``-1``
      (missing is a category of its own). As in scikit-learn, and hence in
      the official encoder, a ``None`` stored in an object column is an
      ordinary category sorted after all others;
    * numeric columns (including NumPy ``bool``, nullable integers and floats)
      are imputed with their training mean; a column that is entirely missing
      during ``fit`` is kept and filled with 0 (upstream bug #147);
    * datetime and timedelta columns become seconds (since the epoch) and are
      imputed like numeric columns.

    Output columns are ordered as the official v0.1.4 ``ColumnTransformer``
    orders them: all categorical columns first, then all other columns, each
    group in input order (see ``column_order_``). For an all-numeric input the
    order is therefore unchanged. Infinite values in a numeric column raise a
    ``ValueError`` that names the column.

    Parameters
    ----------
    verbose : bool, default=False
        Print how each column was classified.

    Attributes
    ----------
    n_features_in_ : int
        Number of input columns.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names, defined only when the input was a DataFrame whose
        column names are all strings.
    column_kinds_ : list of str
        Per input column: ``"categorical"``, ``"numeric"``, ``"datetime"`` or
        ``"timedelta"``.
    categories_ : list
        Per input column: the sorted categories (list) of a categorical
        column, ``None`` otherwise.
    fill_values_ : ndarray of shape (n_features_in_,)
        Imputation value per input column (training mean, 0 for an all-missing
        column, -1 for categorical columns).
    column_order_ : ndarray of shape (n_features_in_,)
        Output column ``k`` holds input column ``column_order_[k]``.
    """

    def __init__(self, verbose=False):
        self.verbose = verbose

    # -- input handling -----------------------------------------------------
    @staticmethod
    def _columns(X):
        """Split ``X`` into (list of columns, column labels or None, is_frame)."""
        if isinstance(X, pd.DataFrame):
            return [X.iloc[:, j] for j in range(X.shape[1])], list(X.columns), True
        if isinstance(X, pd.Series):
            raise ValueError("Expected 2D array, got a pandas Series instead. Reshape your data.")
        if hasattr(X, "toarray") or hasattr(X, "tocsr"):
            raise TypeError("TransformToNumerical does not accept sparse input; pass a dense array.")
        arr = np.asarray(X)
        if arr.dtype.kind in "US" or (not isinstance(X, np.ndarray) and arr.dtype.kind == "O"):
            # keep the original Python objects (numbers stay numbers)
            arr = np.asarray(X, dtype=object)
        if arr.ndim != 2:
            raise ValueError(
                f"Expected 2D array, got {arr.ndim}D array instead. Reshape your data either using "
                "array.reshape(-1, 1) if your data has a single feature or array.reshape(1, -1) "
                "if it contains a single sample."
            )
        if arr.dtype.kind == "c":
            raise ValueError("Complex data not supported.")
        if arr.dtype.kind == "V":
            raise ValueError(f"Unsupported array dtype {arr.dtype}.")
        return [arr[:, j] for j in range(arr.shape[1])], None, False

    @staticmethod
    def _infer_kind(column):
        if isinstance(column, pd.Series):
            dtype = column.dtype
            if isinstance(dtype, pd.CategoricalDtype):
                return "categorical"
            if pd.api.types.is_bool_dtype(dtype):
                # official v0.1.4 encodes the nullable "boolean" dtype and drops NumPy bool
                return "numeric" if dtype == np.dtype(bool) else "categorical"
            if pd.api.types.is_complex_dtype(dtype):
                raise ValueError("Complex data not supported.")
            if pd.api.types.is_numeric_dtype(dtype):
                return "numeric"
            if pd.api.types.is_datetime64_any_dtype(dtype):
                return "datetime"
            if pd.api.types.is_timedelta64_dtype(dtype):
                return "timedelta"
            return "categorical"
        kind = column.dtype.kind
        if kind in "biuf":
            return "numeric"
        if kind == "M":
            return "datetime"
        if kind == "m":
            return "timedelta"
        # object column of a NumPy array: numeric when every present value is a number
        present = column[~np.asarray(pd.isna(column), dtype=bool)]
        return "numeric" if all(_is_number(v) for v in present.tolist()) else "categorical"

    @staticmethod
    def _object_values(column):
        if isinstance(column, pd.Series):
            return column.to_numpy(dtype=object)
        return np.asarray(column, dtype=object)

    def _float_values(self, column, kind, label):
        """A column of kind numeric/datetime/timedelta as float64 (NaN for missing)."""
        if kind == "datetime":
            try:
                stamps = pd.to_datetime(pd.Series(column), utc=True)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"Column {label} was a datetime during fit: {exc}") from exc
            seconds = (stamps - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)
            values = seconds.to_numpy(dtype=np.float64, na_value=np.nan)
        elif kind == "timedelta":
            try:
                deltas = pd.to_timedelta(pd.Series(column))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"Column {label} was a timedelta during fit: {exc}") from exc
            values = (deltas / pd.Timedelta(seconds=1)).to_numpy(dtype=np.float64, na_value=np.nan)
        elif isinstance(column, pd.Series):
            dtype = column.dtype
            if (
                pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)
            ) and not isinstance(dtype, pd.CategoricalDtype):
                values = column.to_numpy(dtype=np.float64, na_value=np.nan)
            else:
                values = _object_to_float(column.to_numpy(dtype=object), label)
        elif column.dtype.kind in "biuf":
            values = column.astype(np.float64)
        else:
            values = _object_to_float(column, label)
        if np.isinf(values).any():
            raise ValueError(
                f"Column {label} contains infinite values; TabICL needs finite inputs "
                "(use NaN for missing values)."
            )
        return values

    # -- API ------------------------------------------------------------------
    def fit(self, X, y=None):
        """Learn column kinds, categories and imputation values.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Training table.
        y : None
            Ignored.

        Returns
        -------
        self : TransformToNumerical
        """
        columns, labels, is_frame = self._columns(X)
        n_samples = len(columns[0]) if columns else (X.shape[0] if hasattr(X, "shape") else len(X))
        if n_samples < 1:
            raise ValueError(f"Found array with 0 sample(s) (shape=({n_samples}, {len(columns)})) while a "
                             "minimum of 1 is required.")
        if not columns:
            raise ValueError(f"Found array with 0 feature(s) (shape=({n_samples}, 0)) while a minimum of 1 "
                             "is required.")
        self.n_features_in_ = len(columns)
        names = None
        if is_frame and all(isinstance(name, str) for name in labels):
            names = np.asarray(labels, dtype=object)
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

        self.column_kinds_, self.categories_ = [], []
        self.fill_values_ = np.zeros(self.n_features_in_)
        for j, column in enumerate(columns):
            kind = self._infer_kind(column)
            self.column_kinds_.append(kind)
            if kind == "categorical":
                values = self._object_values(column)
                present = values[~_category_missing(values)]
                self.categories_.append(_sort_categories(present.tolist()))
                self.fill_values_[j] = -1.0
            else:
                self.categories_.append(None)
                mean = _safe_nanmean(self._float_values(column, kind, _column_label(labels, j)))
                self.fill_values_[j] = 0.0 if np.isnan(mean) else mean
        is_cat = np.array([kind == "categorical" for kind in self.column_kinds_], dtype=bool)
        self.column_order_ = np.concatenate([np.flatnonzero(is_cat), np.flatnonzero(~is_cat)]).astype(np.intp)
        self._category_maps = [
            None if cats is None else {value: code for code, value in enumerate(cats)} for cats in self.categories_
        ]
        if self.verbose:
            shown = labels if labels is not None else list(range(self.n_features_in_))
            for kind in ("categorical", "numeric", "datetime", "timedelta"):
                cols = [shown[j] for j, k in enumerate(self.column_kinds_) if k == kind]
                if cols:
                    print(f"Columns classified as {kind}: {cols}")
        return self

    def transform(self, X):
        """Encode ``X`` with the fitted categories and imputation values.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features_in_)

        Returns
        -------
        X_out : ndarray of shape (n_samples, n_features_in_), float64
            Columns ordered as ``column_order_``.
        """
        check_is_fitted(self, "column_order_")
        columns, labels, is_frame = self._columns(X)
        if len(columns) != self.n_features_in_:
            raise ValueError(
                f"X has {len(columns)} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input."
            )
        fitted_names = getattr(self, "feature_names_in_", None)
        if is_frame and fitted_names is not None:
            if [str(c) for c in labels] != list(fitted_names) or not all(isinstance(c, str) for c in labels):
                raise ValueError("The feature names should match those that were passed during fit.")
        elif is_frame and fitted_names is None and all(isinstance(c, str) for c in labels):
            warnings.warn(f"X has feature names, but {type(self).__name__} was fitted without feature names")
        elif not is_frame and fitted_names is not None:
            warnings.warn(
                f"X does not have valid feature names, but {type(self).__name__} was fitted with feature names"
            )
        n_samples = len(columns[0])
        out = np.empty((n_samples, self.n_features_in_), dtype=np.float64)
        for k, j in enumerate(self.column_order_):
            kind = self.column_kinds_[j]
            if kind == "categorical":
                values = self._object_values(columns[j])
                missing = _category_missing(values)
                codes = np.full(n_samples, -1.0)
                mapping = self._category_maps[j]
                present = np.flatnonzero(~missing)
                if present.size:
                    codes[present] = [mapping.get(v, -1) for v in values[present].tolist()]
                out[:, k] = codes
            else:
                values = self._float_values(columns[j], kind, _column_label(labels, j))
                out[:, k] = np.where(np.isnan(values), self.fill_values_[j], values)
        return out

    def get_feature_names_out(self, input_features=None):
        """Output column names (input names in ``column_order_``)."""
        check_is_fitted(self, "column_order_")
        if input_features is None:
            input_features = getattr(self, "feature_names_in_", None)
        if input_features is None:
            input_features = [f"x{j}" for j in range(self.n_features_in_)]
        input_features = np.asarray(input_features, dtype=object)
        if input_features.shape != (self.n_features_in_,):
            raise ValueError("input_features should have length equal to n_features_in_.")
        return input_features[self.column_order_]

    def __setstate__(self, state):
        super().__setstate__(state)
        if "categories_" in self.__dict__ and "_category_maps" not in self.__dict__:
            self._category_maps = [
                None if c is None else {v: i for i, v in enumerate(c)} for c in self.categories_
            ]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        return tags


# --------------------------------------------------------------------------
# 2. constant-column filter
# --------------------------------------------------------------------------
class UniqueFeatureFilter(TransformerMixin, BaseEstimator):
    """Drop columns with at most ``threshold`` distinct values in the training set.

    The mask learnt in ``fit`` is reused by ``transform``. As in the official
    implementation, every column is kept when there are at most ``threshold``
    training rows. When every column is constant, ``n_features_out_ == 0``
    and ``transform`` returns an ``(n_samples, 0)`` array (the classifier then
    falls back to the class prior). NaN counts as one value.

    Parameters
    ----------
    threshold : int, default=1

    Attributes
    ----------
    n_features_in_ : int
    features_to_keep_ : ndarray of bool, shape (n_features_in_,)
    n_features_out_ : int
    """

    def __init__(self, threshold=1):
        self.threshold = threshold

    def fit(self, X, y=None):
        """Learn which columns vary on the training rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : UniqueFeatureFilter
        """
        X = validate_data(self, X, dtype="numeric", ensure_all_finite="allow-nan")
        if X.shape[0] <= self.threshold:
            self.features_to_keep_ = np.ones(X.shape[1], dtype=bool)
        else:
            self.features_to_keep_ = np.array(
                [np.unique(X[:, j]).size > self.threshold for j in range(X.shape[1])], dtype=bool
            )
        self.n_features_out_ = int(self.features_to_keep_.sum())
        return self

    def transform(self, X):
        """Keep the columns selected in ``fit``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_in_)

        Returns
        -------
        X_out : ndarray of shape (n_samples, n_features_out_)
        """
        check_is_fitted(self, "features_to_keep_")
        X = validate_data(self, X, reset=False, dtype="numeric", ensure_all_finite="allow-nan")
        return X[:, self.features_to_keep_]

    def get_feature_names_out(self, input_features=None):
        """Names of the kept columns."""
        check_is_fitted(self, "features_to_keep_")
        if input_features is None:
            input_features = getattr(self, "feature_names_in_", None)
        if input_features is None:
            input_features = [f"x{j}" for j in range(self.n_features_in_)]
        return np.asarray(input_features, dtype=object)[self.features_to_keep_]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags


# --------------------------------------------------------------------------
# 3. scaling, normalisation, outliers
# --------------------------------------------------------------------------
class CustomStandardScaler(TransformerMixin, BaseEstimator):
    """Standardise as ``(x - mean) / (std + epsilon)`` and clip to ``[clip_min, clip_max]``.

    ``std`` is the population standard deviation (``ddof=0``). A column whose
    mean or standard deviation overflows float64 (values beyond ~1e154) is
    standardised in a rescaled unit (``prescale_``) instead of producing
    NaN; for every other column ``prescale_`` is 1 and the result is
    bit-identical to the official implementation.

    Parameters
    ----------
    clip_min : float, default=-100
    clip_max : float, default=100
    epsilon : float, default=1e-6

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,)
        Column means (in units of ``prescale_``).
    scale_ : ndarray of shape (n_features,)
        Column standard deviations plus ``epsilon`` (in units of ``prescale_``).
    prescale_ : ndarray of shape (n_features,)
        Divisor applied to a column before standardising (1 almost always).
    """

    def __init__(self, clip_min=-100, clip_max=100, epsilon=1e-6):
        self.clip_min = clip_min
        self.clip_max = clip_max
        self.epsilon = epsilon

    def fit(self, X, y=None):
        """Compute column means and standard deviations.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : CustomStandardScaler
        """
        X = validate_data(self, X, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            mean = np.mean(X, axis=0)
            std = np.std(X, axis=0)
        prescale = np.ones(X.shape[1])
        bad = ~(np.isfinite(mean) & np.isfinite(std))
        if bad.any():
            prescale[bad] = np.max(np.abs(X[:, bad]), axis=0)
            rescaled = X[:, bad] / prescale[bad]
            mean[bad] = np.mean(rescaled, axis=0)
            std[bad] = np.std(rescaled, axis=0)
        self.mean_ = mean
        self.scale_ = std + self.epsilon
        self.prescale_ = prescale
        return self

    def transform(self, X):
        """Standardise and clip.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_out : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self, "scale_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        rescaled = self.prescale_ != 1.0
        if rescaled.any():
            X = X.copy()
            X[:, rescaled] /= self.prescale_[rescaled]
        with np.errstate(over="ignore"):
            X_scaled = (X - self.mean_) / self.scale_
        return np.clip(X_scaled, self.clip_min, self.clip_max)


class RTDLQuantileTransformer(TransformerMixin, BaseEstimator):
    """Quantile transform fitted on noise-perturbed data (RTDL recipe).

    ``fit`` adds Gaussian noise of standard deviation
    ``noise / max(std_j, noise)`` to each column ``j`` (drawn from
    ``numpy.random.default_rng(random_state)``) and fits a
    :class:`~sklearn.preprocessing.QuantileTransformer` with
    ``max(min(n_samples // 30, n_quantiles), 10)`` quantiles on the noisy
    data; ``transform`` applies it to clean data.

    Parameters
    ----------
    noise : float, default=1e-3
    n_quantiles : int, default=1000
    subsample : int, default=1_000_000_000
    output_distribution : {"normal", "uniform"}, default="normal"
    random_state : int, RandomState instance or None, default=None

    Attributes
    ----------
    normalizer_ : QuantileTransformer
    """

    def __init__(self, noise=1e-3, n_quantiles=1000, subsample=1_000_000_000, output_distribution="normal",
                 random_state=None):
        self.noise = noise
        self.n_quantiles = n_quantiles
        self.subsample = subsample
        self.output_distribution = output_distribution
        self.random_state = random_state

    def fit(self, X, y=None):
        """Fit the quantiles on the noise-perturbed training data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : RTDLQuantileTransformer
        """
        X = validate_data(self, X, dtype=np.float64)
        seed = _resolve_seed(self.random_state)
        n_quantiles = max(min(X.shape[0] // 30, self.n_quantiles), 10)
        # QuantileTransformer caps n_quantiles at n_samples itself (with a warning)
        normalizer = QuantileTransformer(
            output_distribution=self.output_distribution,
            n_quantiles=min(n_quantiles, X.shape[0]),
            subsample=self.subsample,
            random_state=seed,
        )
        if self.noise > 0:
            stds = np.std(X, axis=0, keepdims=True)
            noise_std = self.noise / np.maximum(stds, self.noise)
            X = X + noise_std * np.random.default_rng(seed).standard_normal(X.shape)
        self.normalizer_ = normalizer.fit(X)
        return self

    def transform(self, X):
        """Apply the fitted quantile transform.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_out : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self, "normalizer_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.normalizer_.transform(X)


class OutlierRemover(TransformerMixin, BaseEstimator):
    """Two-stage z-score bounds with logarithmic soft clipping.

    ``fit``: compute column mean and standard deviation (``ddof=1``, or 0 for
    a single row; floored at 1e-6), mark values beyond ``threshold``
    standard deviations as missing, recompute mean and standard deviation
    without them, and set ``lower_bounds_ = mean - threshold * std``,
    ``upper_bounds_ = mean + threshold * std``.

    ``transform``: ``x <- max(x, lower - log1p|x|)`` then
    ``x <- min(x, upper + log1p|x|)``; the identity inside the bounds.

    Parameters
    ----------
    threshold : float, default=4.0

    Attributes
    ----------
    means_, stds_, lower_bounds_, upper_bounds_ : ndarray of shape (n_features,)
    """

    def __init__(self, threshold=4.0):
        self.threshold = threshold

    def fit(self, X, y=None):
        """Learn the clipping bounds.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : OutlierRemover
        """
        X = validate_data(self, X, dtype=np.float64)
        ddof = 1 if X.shape[0] > 1 else 0
        means = np.mean(X, axis=0)
        stds = np.maximum(np.std(X, axis=0, ddof=ddof), 1e-6)
        lower = means - self.threshold * stds
        upper = means + self.threshold * stds
        X_clean = X.copy()
        X_clean[(X < lower) | (X > upper)] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            self.means_ = np.nanmean(X_clean, axis=0)
            self.stds_ = np.maximum(np.nanstd(X_clean, axis=0, ddof=ddof), 1e-6)
        self.lower_bounds_ = self.means_ - self.threshold * self.stds_
        self.upper_bounds_ = self.means_ + self.threshold * self.stds_
        return self

    def transform(self, X):
        """Softly clip values outside the bounds.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_out : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self, "lower_bounds_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        X = np.maximum(self.lower_bounds_ - np.log1p(np.abs(X)), X)
        return np.minimum(self.upper_bounds_ + np.log1p(np.abs(X)), X)


def _make_normalizer(method, seed, n_samples):
    if method == "power":
        # PowerTransformer(method="yeo-johnson") with the lambdas of all columns found at once
        return YeoJohnsonTransformer()
    if method == "quantile":
        # official: the default n_quantiles=1000, which QuantileTransformer caps at
        # n_samples with a warning; capping here gives the same quantiles silently
        return QuantileTransformer(
            output_distribution="normal", n_quantiles=min(1000, n_samples), random_state=seed
        )
    if method == "quantile_rtdl":
        return Pipeline([
            ("quantile_rtdl", RTDLQuantileTransformer(output_distribution="normal", random_state=seed)),
            ("std", StandardScaler()),
        ])
    if method == "robust":
        return RobustScaler(unit_variance=True)
    raise ValueError(f"Unknown normalization method {method!r}; expected one of {NORM_METHODS}.")


class PreprocessingPipeline(TransformerMixin, BaseEstimator):
    """Standard scaling, then a normaliser, then outlier soft-clipping.

    1. :class:`CustomStandardScaler` (clip to +-100);
    2. the normaliser of ``normalization_method``: ``"none"``, ``"power"``
       (Yeo-Johnson, standardised), ``"quantile"`` (quantile transform to a
       normal distribution), ``"quantile_rtdl"`` (:class:`RTDLQuantileTransformer`
       then :class:`~sklearn.preprocessing.StandardScaler`) or ``"robust"``
       (:class:`~sklearn.preprocessing.RobustScaler` with unit variance). If it
       fails on test data, the input is clipped to the training range
       (``X_min_``, ``X_max_``) and transformed again, as in the official code;
    3. :class:`OutlierRemover` with ``outlier_threshold``.

    Fixes over v0.1.4 (which would crash or emit inf/NaN in these cases): a
    normaliser that raises or produces non-finite values while fitting is
    dropped with a warning (``normalizer_`` is ``None``); non-finite values
    left after the clipping fallback are replaced by finite ones before the
    soft clipping.

    Parameters
    ----------
    normalization_method : str, default="power"
    outlier_threshold : float, default=4.0
    random_state : int, RandomState instance or None, default=None
        Seeds the quantile transforms (subsampling, RTDL noise).

    Attributes
    ----------
    standard_scaler_ : CustomStandardScaler
    normalizer_ : estimator or None
    outlier_remover_ : OutlierRemover
    X_min_, X_max_ : ndarray of shape (1, n_features)
        Range of the scaled training data (only with a normaliser).
    X_transformed_ : ndarray of shape (n_samples, n_features), float64
        The transformed training data (cached; equals ``fit_transform``).
    """

    def __init__(self, normalization_method="power", outlier_threshold=4.0, random_state=None):
        self.normalization_method = normalization_method
        self.outlier_threshold = outlier_threshold
        self.random_state = random_state

    def fit(self, X, y=None):
        """Fit the three steps and cache the transformed training data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : PreprocessingPipeline
        """
        X = validate_data(self, X, dtype=np.float64)
        method = self.normalization_method
        if method not in NORM_METHODS:
            raise ValueError(f"Unknown normalization method {method!r}; expected one of {NORM_METHODS}.")
        self.standard_scaler_ = CustomStandardScaler()
        X_scaled = self.standard_scaler_.fit_transform(X)
        self.normalizer_ = None
        X_normalized = X_scaled
        if method != "none":
            self.X_min_ = np.min(X_scaled, axis=0, keepdims=True)
            self.X_max_ = np.max(X_scaled, axis=0, keepdims=True)
            normalizer = _make_normalizer(method, _resolve_seed(self.random_state), X.shape[0])
            try:
                with np.errstate(over="ignore", invalid="ignore"):
                    candidate = normalizer.fit_transform(X_scaled)
                failure = None if np.isfinite(candidate).all() else "non-finite output"
            except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
                failure = repr(exc)
            if failure is None:
                self.normalizer_ = normalizer
                X_normalized = candidate
            else:
                warnings.warn(
                    f"Normalization {method!r} failed on the training data ({failure}); "
                    "using the standard-scaled data instead.",
                    RuntimeWarning,
                )
        self.outlier_remover_ = OutlierRemover(threshold=self.outlier_threshold)
        self.X_transformed_ = self.outlier_remover_.fit_transform(X_normalized)
        return self

    def transform(self, X):
        """Apply the fitted steps.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_out : ndarray of shape (n_samples, n_features), float64
        """
        check_is_fitted(self, "X_transformed_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        X = self.standard_scaler_.transform(X)
        if self.normalizer_ is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                try:
                    X_normalized = self.normalizer_.transform(X)
                except ValueError:
                    X_normalized = None
                if X_normalized is None or not np.isfinite(X_normalized).all():
                    # official fallback: clip to the training range and retry
                    X_normalized = self.normalizer_.transform(np.clip(X, self.X_min_, self.X_max_))
            if not np.isfinite(X_normalized).all():
                big = np.finfo(np.float64).max / 4
                X_normalized = np.nan_to_num(X_normalized, nan=0.0, posinf=big, neginf=-big)
            X = X_normalized
        return self.outlier_remover_.transform(X)


class PrincipalProjection(TransformerMixin, BaseEstimator):
    """Project a table onto its leading principal components.

    Categorical columns (integer codes, as :class:`TransformToNumerical`
    writes them) are one-hot encoded, numeric columns standardised, and the
    result is projected onto at most ``n_components`` principal axes fitted
    on the training rows. Axes with (numerically) zero variance are dropped.

    This is the second view of skicml's TabICL ensemble. A small network
    reads a few decorrelated columns far better than many correlated ones
    (wide tables such as pixels or one-hot sequences). Averaging members
    that see the principal view with members that see the raw columns had a
    lower log loss than the raw columns alone on every benchmark table with
    more than twelve columns, and than the principal view alone on 14 of
    those 19 (doc/performance.rst).

    Parameters
    ----------
    n_components : int, default=16
        Most principal components kept.
    categorical_features : array-like of bool of shape (n_features,) or None, default=None
        Which columns hold category codes; ``None`` means none.
    max_categories : int, default=32
        One-hot columns per categorical column; rarer categories share one.

    Attributes
    ----------
    n_features_in_ : int
    encoder_ : OneHotEncoder or None
        Fitted on the categorical columns (``None`` without any).
    scaler_ : StandardScaler or None
        Fitted on the numeric columns (``None`` without any).
    categorical_mask_ : ndarray of bool of shape (n_features_in_,)
    pca_ : PCA
    n_components_ : int
        Components returned by ``transform`` (may be 0 for a constant table).
    """

    def __init__(self, n_components=16, categorical_features=None, max_categories=32):
        self.n_components = n_components
        self.categorical_features = categorical_features
        self.max_categories = max_categories

    def _blocks(self, X, fit):
        blocks = []
        if self.categorical_mask_.any():
            codes = X[:, self.categorical_mask_]
            blocks.append(self.encoder_.fit_transform(codes) if fit else self.encoder_.transform(codes))
        if (~self.categorical_mask_).any():
            values = X[:, ~self.categorical_mask_]
            blocks.append(self.scaler_.fit_transform(values) if fit else self.scaler_.transform(values))
        return np.hstack(blocks)

    def fit(self, X, y=None):
        """Fit the encoding, the scaling and the principal axes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Finite numeric data.
        y : None
            Ignored.

        Returns
        -------
        self : PrincipalProjection
        """
        X = validate_data(self, X, dtype=np.float64)
        if not isinstance(self.n_components, numbers.Integral) or self.n_components < 1:
            raise ValueError(f"n_components must be a positive integer, got {self.n_components!r}.")
        categorical = (np.zeros(X.shape[1], dtype=bool) if self.categorical_features is None
                       else np.asarray(self.categorical_features, dtype=bool))
        if categorical.shape != (X.shape[1],):
            raise ValueError(f"categorical_features has {categorical.size} entries for {X.shape[1]} columns.")
        self.categorical_mask_ = categorical
        self.encoder_ = (OneHotEncoder(handle_unknown="ignore", sparse_output=False,
                                       max_categories=self.max_categories, dtype=np.float64)
                         if categorical.any() else None)
        self.scaler_ = StandardScaler() if (~categorical).any() else None
        Z = self._blocks(X, fit=True)
        n_components = min(self.n_components, *Z.shape)
        with np.errstate(divide="ignore", invalid="ignore"):  # a constant table has no variance to share
            self.pca_ = PCA(n_components=n_components, svd_solver="full").fit(Z)
        variance = self.pca_.explained_variance_
        self.n_components_ = int(np.sum(variance > 1e-12 * max(variance.sum(), np.finfo(float).tiny)))
        return self

    def transform(self, X):
        """The leading ``n_components_`` principal components of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_in_)

        Returns
        -------
        X_out : ndarray of shape (n_samples, n_components_), float64
        """
        check_is_fitted(self, "pca_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.pca_.transform(self._blocks(X, fit=False))[:, :self.n_components_]


# --------------------------------------------------------------------------
# 4. feature permutations
# --------------------------------------------------------------------------
class _PermutationRows(Sequence):
    """Read-only sequence of permutations ``row(i)`` built on demand.

    Used for the Latin-square and cyclic-shift families, whose ``n`` rows of
    ``n`` entries would take ``O(n^2)`` memory if materialised.
    """

    def __init__(self, n_rows, row):
        self._n_rows = n_rows
        self._row = row

    def __len__(self):
        return self._n_rows

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._n_rows))]
        index = operator.index(index)
        if index < 0:
            index += self._n_rows
        if not 0 <= index < self._n_rows:
            raise IndexError("permutation index out of range")
        return self._row(index)


def latin_square_permutations(n_features, random_state=None):
    """The ``n_features`` rows of a random Latin square over the column indices.

    Row ``m`` is a permutation of ``range(n_features)`` and, across the rows,
    every feature occupies every position exactly once. For the same integer
    seed the rows equal those of the official v0.1.4 ``FeatureShuffler``
    (recursive construction, then a row shuffle, a transpose and a column
    shuffle), consuming the same :class:`random.Random` draws; they are built
    without recursion and in ``O(n)`` memory: the official square is cyclic,
    ``S[i, j] = b[(j - i) mod n]`` for the sequence ``b`` of drawn symbols, so
    the result is ``R[m, k] = b[(Q[m] - P[k]) mod n]`` with ``P`` and ``Q``
    the row and column shuffles.

    Parameters
    ----------
    n_features : int
    random_state : int, RandomState, random.Random instance or None
        An integer seeds :class:`random.Random` exactly as the official code
        does; a :class:`random.Random` instance is used (and advanced) as is.

    Returns
    -------
    rows : Sequence of ndarray
        ``len(rows) == n_features``; ``rows[m]`` is an int array of shape
        ``(n_features,)``, computed when accessed.
        ``np.stack(list(rows))`` materialises the square.
    """
    n = operator.index(n_features)
    if n < 0:
        raise ValueError("n_features must be non-negative.")
    rng = _python_rng(random_state)
    symbols = list(range(n))
    drawn = []
    while len(symbols) > 1:  # the official recursion draws one symbol per level
        drawn.append(symbols.pop(rng.choice(range(len(symbols)))))
    drawn.extend(symbols)
    row_shuffle = list(range(n))
    rng.shuffle(row_shuffle)
    col_shuffle = list(range(n))
    rng.shuffle(col_shuffle)
    order = np.asarray(drawn, dtype=np.intp)
    rows = np.asarray(row_shuffle, dtype=np.intp)
    cols = np.asarray(col_shuffle, dtype=np.intp)
    return _PermutationRows(n, lambda m: order[(cols[m] - rows) % n])


def feature_permutations(n_features, method="latin", n_estimators=32, random_state=None,
                         max_features_for_latin=4000):
    """Column orders for the ensemble members (official ``FeatureShuffler.shuffle``).

    * ``"none"`` (or ``n_estimators == 1``): only the identity;
    * ``"shift"``: the ``n_features`` cyclic shifts, shift ``i`` being
      ``np.roll(arange(n_features), i)``;
    * ``"random"``: ``min(n_estimators, n_features!)`` distinct permutations
      when ``n_features <= 5``, else ``n_estimators`` random permutations;
    * ``"latin"``: :func:`latin_square_permutations`; above
      ``max_features_for_latin`` features ``"random"`` is used instead (as in
      the official code).

    With zero features a single empty permutation is returned.

    Parameters
    ----------
    n_features : int
    method : {"latin", "shift", "random", "none"}, default="latin"
    n_estimators : int, default=32
    random_state : int, RandomState, random.Random instance or None
        Seeds a :class:`random.Random` of its own, as in the official code.
    max_features_for_latin : int or None, default=4000
        ``None`` never falls back to ``"random"``.

    Returns
    -------
    permutations : Sequence of ndarray of shape (n_features,)
    """
    n = operator.index(n_features)
    if method not in SHUFFLE_METHODS:
        raise ValueError(f"Unknown feature shuffle method {method!r}; expected one of {SHUFFLE_METHODS}.")
    if method == "latin" and max_features_for_latin is not None and n > max_features_for_latin:
        method = "random"
    identity = np.arange(n, dtype=np.intp)
    if n == 0 or method == "none" or n_estimators == 1:
        return [identity]
    rng = _python_rng(random_state)
    if method == "shift":
        return _PermutationRows(n, lambda i: np.roll(identity, i))
    if method == "random":
        indices = list(range(n))
        if n <= 5:
            every = list(itertools.permutations(indices))
            chosen = rng.sample(every, min(n_estimators, len(every)))
        else:
            chosen = [rng.sample(indices, n) for _ in range(n_estimators)]
        return [np.asarray(p, dtype=np.intp) for p in chosen]
    return latin_square_permutations(n, rng)


# --------------------------------------------------------------------------
# 5. ensemble members
# --------------------------------------------------------------------------
class EnsembleGenerator(BaseEstimator):
    """Draw the ensemble members of TabICL and preprocess the data for them.

    Each member is a triple ``(method, permutation, offset)``: the
    normalisation method of its :class:`PreprocessingPipeline`, the order in
    which it sees the (filtered) columns, and the cyclic shift applied to its
    training labels, ``(y + offset) mod n_classes_``.

    The members are drawn as in the official ``_generate_ensemble``: the
    column permutations of :func:`feature_permutations` times the class
    offsets (a random permutation of ``0 .. K-1`` when ``class_shift`` and
    ``n_estimators > 1``, else ``[0]``), shuffled, then combined with
    ``norm_methods`` with the method varying fastest, keeping the first
    ``n_estimators``; there are fewer members when there are fewer
    combinations. For the same integer ``random_state`` the members equal the
    official ones. Unlike the official code, members are kept in that drawing
    order (``configs_``) and grouped by method in the order of
    ``norm_methods`` (the official grouping follows ``set`` order).

    With ``pca_components`` (skicml's addition) the members alternate, one
    group of ``len(norm_methods)`` at a time, between the raw columns and the
    table's leading principal components (:class:`PrincipalProjection`). A
    member's ``method`` is then a view key: the normalisation method for the
    raw view, ``"pca:" + method`` for the principal view, whose
    permutations order the components. Without it (the default) the members
    are exactly the official ones.

    Parameters
    ----------
    n_estimators : int, default=32
    norm_methods : str, list of str or None, default=None
        ``None`` means ``["none", "power"]``.
    feat_shuffle_method : {"latin", "shift", "random", "none"}, default="latin"
    class_shift : bool, default=True
    outlier_threshold : float, default=4.0
    random_state : int, RandomState instance or None, default=None
    pca_components : int or None, default=None
        Most principal components of the principal view; ``None`` disables it.
    categorical_features : array-like of bool of shape (n_features,) or None, default=None
        Columns holding category codes, one-hot encoded by the principal view.

    Attributes
    ----------
    n_features_in_ : int
        Number of input columns (before the constant-column filter).
    norm_methods_ : list of str
    seed_ : int
        The integer seed all random draws derive from.
    classes_ : ndarray of shape (n_classes_,)
        Sorted distinct training labels; ``y`` is encoded as indices into it.
    n_classes_ : int
    unique_filter_ : UniqueFeatureFilter
    features_kept_ : ndarray of bool, shape (n_features_in_,)
    n_features_out_ : int
        ``H``, the number of columns the members see (may be 0).
    class_offsets_drawn_ : list of int
        The class offsets in drawing order.
    projection_ : PrincipalProjection or None
        The fitted principal view (``None`` when it is disabled or empty).
    configs_ : list of (str, ndarray of shape (H,), int)
        ``(method, permutation, offset)`` of every member, in drawing order.
        Member ``i`` sees column ``permutation[k]`` of ``X_train_[method]`` at
        position ``k``.
    n_estimators_ : int
        ``len(configs_)``.
    members_by_method_ : OrderedDict of str -> ndarray of int
        Indices into ``configs_`` of the members of each used method.
    shuffle_patterns_ : OrderedDict of str -> ndarray of shape (n_members_m, H)
        Permutations of those members (same order as ``members_by_method_``).
    class_offsets_ : OrderedDict of str -> ndarray of shape (n_members_m,)
        Class offsets of those members.
    preprocessors_ : OrderedDict of str -> PreprocessingPipeline or None
        Fitted pipeline of each used method (``None`` when ``H == 0``).
    X_train_ : OrderedDict of str -> ndarray of shape (n_train, H), float32
        Transformed training data of each used method (columns not permuted;
        a ``"pca:"`` key has ``projection_.n_components_`` columns instead of ``H``).
    y_train_ : ndarray of shape (n_train,), int64
        Encoded training labels ``0 .. K-1``.
    y_members_ : ndarray of shape (n_estimators_, n_train), int64
        Training labels of each member, ``(y_train_ + offset) % n_classes_``.
    """

    def __init__(self, n_estimators=32, norm_methods=None, feat_shuffle_method="latin", class_shift=True,
                 outlier_threshold=4.0, random_state=None, pca_components=None, categorical_features=None):
        self.n_estimators = n_estimators
        self.norm_methods = norm_methods
        self.feat_shuffle_method = feat_shuffle_method
        self.class_shift = class_shift
        self.outlier_threshold = outlier_threshold
        self.random_state = random_state
        self.pca_components = pca_components
        self.categorical_features = categorical_features

    def _check_params(self):
        if not isinstance(self.n_estimators, numbers.Integral) or self.n_estimators < 1:
            raise ValueError(f"n_estimators must be a positive integer, got {self.n_estimators!r}.")
        if self.norm_methods is None:
            methods = ["none", "power"]
        elif isinstance(self.norm_methods, str):
            methods = [self.norm_methods]
        else:
            methods = list(self.norm_methods)
        if not methods:
            raise ValueError("norm_methods must name at least one normalization method.")
        for method in methods:
            if method not in NORM_METHODS:
                raise ValueError(f"Unknown normalization method {method!r}; expected one of {NORM_METHODS}.")
        if self.pca_components is not None and (
                not isinstance(self.pca_components, numbers.Integral) or isinstance(self.pca_components, bool)
                or self.pca_components < 1):
            raise ValueError(f"pca_components must be a positive integer or None, got {self.pca_components!r}.")
        if self.feat_shuffle_method not in SHUFFLE_METHODS:
            raise ValueError(
                f"Unknown feature shuffle method {self.feat_shuffle_method!r}; expected one of {SHUFFLE_METHODS}."
            )
        return methods

    def fit(self, X, y):
        """Filter constant columns, draw the members and fit one pipeline per used method.

        Parameters
        ----------
        X : array-like of shape (n_train, n_features)
            Numeric, finite training data (e.g. the output of
            :class:`TransformToNumerical`).
        y : array-like of shape (n_train,)
            Training labels (any values; encoded to ``0 .. K-1``).

        Returns
        -------
        self : EnsembleGenerator
        """
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        X, y = validate_data(self, X, y, dtype=np.float64)
        self.norm_methods_ = methods = self._check_params()
        self.classes_, y_encoded = np.unique(y, return_inverse=True)
        self.n_classes_ = n_classes = len(self.classes_)
        self.seed_ = _resolve_seed(self.random_state)

        self.unique_filter_ = UniqueFeatureFilter().fit(X)
        X = self.unique_filter_.transform(X)
        self.features_kept_ = self.unique_filter_.features_to_keep_
        self.n_features_out_ = n_features = X.shape[1]
        views = {"": (X, feature_permutations(n_features, self.feat_shuffle_method, self.n_estimators, self.seed_))}
        self.projection_ = self._fit_projection(X)
        if self.projection_ is not None:
            X_pca = self.projection_.transform(X)
            views[PCA_VIEW] = (X_pca, feature_permutations(X_pca.shape[1], self.feat_shuffle_method,
                                                         self.n_estimators, self.seed_))

        # official _generate_ensemble: its own Random for the class offsets and the
        # shuffle, a separate one (same seed) inside the feature shuffler
        rng = random.Random(self.seed_)
        patterns = views[""][1]
        if self.class_shift and self.n_estimators > 1:
            offsets = rng.sample(range(n_classes), n_classes)
        else:
            offsets = [0]
        self.class_offsets_drawn_ = [int(o) for o in offsets]
        pairs = list(range(len(patterns) * len(offsets)))  # product(patterns, offsets), offsets fastest
        rng.shuffle(pairs)
        # The method varies fastest, then the view: the views take turns with
        # one official group of len(methods) members each, so the raw members
        # are the official draw and a principal-view group reuses its pair.
        prefixes = list(views)
        n_members = min(self.n_estimators, len(pairs) * len(methods) * len(prefixes))
        self.configs_ = []
        for t in range(n_members):
            group, view_index = divmod(t // len(methods), len(prefixes))
            pattern_index, offset_index = divmod(pairs[group % len(pairs)], len(offsets))
            prefix = prefixes[view_index]
            view_patterns = views[prefix][1]
            self.configs_.append(
                (prefix + methods[t % len(methods)],
                 np.asarray(view_patterns[pattern_index % len(view_patterns)], dtype=np.intp),
                 int(offsets[offset_index]))
            )
        self.n_estimators_ = len(self.configs_)

        self.members_by_method_ = OrderedDict()
        for key in dict.fromkeys(prefix + method for prefix in prefixes for method in methods):
            members = [i for i, config in enumerate(self.configs_) if config[0] == key]
            if members:
                self.members_by_method_[key] = np.asarray(members, dtype=np.intp)
        self.shuffle_patterns_ = OrderedDict(
            (m, np.stack([self.configs_[i][1] for i in idx]).reshape(len(idx), -1))
            for m, idx in self.members_by_method_.items()
        )
        self.class_offsets_ = OrderedDict(
            (m, np.asarray([self.configs_[i][2] for i in idx], dtype=np.int64))
            for m, idx in self.members_by_method_.items()
        )

        self.preprocessors_ = OrderedDict()
        self.X_train_ = OrderedDict()
        for key in self.members_by_method_:
            prefix = PCA_VIEW if key.startswith(PCA_VIEW) else ""
            X_view = views[prefix][0]
            method = key[len(prefix):]
            if X_view.shape[1] == 0:  # every column constant: nothing to preprocess
                self.preprocessors_[key] = None
                self.X_train_[key] = np.zeros((X.shape[0], 0), dtype=np.float32)
                continue
            pipeline = PreprocessingPipeline(
                normalization_method=method, outlier_threshold=self.outlier_threshold, random_state=self.seed_
            ).fit(X_view)
            self.preprocessors_[key] = pipeline
            self.X_train_[key] = pipeline.X_transformed_.astype(np.float32)
        self.y_train_ = y_encoded.astype(np.int64)
        member_offsets = np.asarray([config[2] for config in self.configs_], dtype=np.int64)
        self.y_members_ = (self.y_train_[None, :] + member_offsets[:, None]) % n_classes
        return self

    def _fit_projection(self, X):
        """The fitted principal view of the filtered training columns, or ``None``."""
        if self.pca_components is None or X.shape[1] == 0 or X.shape[0] < 2:
            return None
        categorical = self.categorical_features
        if categorical is not None:
            categorical = np.asarray(categorical, dtype=bool)
            if categorical.shape != (self.n_features_in_,):
                raise ValueError(
                    f"categorical_features has {categorical.size} entries for {self.n_features_in_} columns."
                )
            categorical = categorical[self.features_kept_]
        projection = PrincipalProjection(n_components=self.pca_components, categorical_features=categorical).fit(X)
        return projection if projection.n_components_ > 0 else None

    def transform(self, X):
        """Preprocess test rows once per used normalisation method.

        Parameters
        ----------
        X : array-like of shape (n_test, n_features_in_)

        Returns
        -------
        X_test : OrderedDict of str -> ndarray of shape (n_test, H), float32
            Same keys and column order as ``X_train_``; member ``i`` of
            method ``m`` uses ``X_test[m][:, configs_[i][1]]``.
        """
        check_is_fitted(self, "configs_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        X = self.unique_filter_.transform(X)
        X_pca = None if self.projection_ is None else self.projection_.transform(X)
        out = OrderedDict()
        for key, pipeline in self.preprocessors_.items():
            X_view = X_pca if key.startswith(PCA_VIEW) else X
            if pipeline is None:  # no column left after the constant-column filter
                out[key] = np.zeros((X.shape[0], 0), dtype=np.float32)
            else:
                out[key] = pipeline.transform(X_view).astype(np.float32)
        return out
