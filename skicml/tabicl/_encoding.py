"""TabICL's input encoding: any table to the float columns the network reads.

The numerics follow the official ``tabicl`` v0.1.4 implementation
(``tabicl/sklearn/preprocessing.py``) so that an official checkpoint sees the
same inputs, with its known robustness bugs fixed:

* :class:`TransformToNumerical` turns any table (NumPy, lists, pandas with
  numeric / categorical / string / boolean / datetime columns and missing
  values) into a float64 matrix. Unlike v0.1.x it never drops a column, keeps
  all-NaN columns (upstream #147, #143), encodes NumPy object arrays holding
  strings (#123) and accepts integer column names (#2).
* :class:`UniqueFeatureFilter` removes columns that are constant on the
  training rows.
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ..base import warn_user

__all__ = ["TransformToNumerical", "UniqueFeatureFilter"]


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------
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


def _is_numeric_string(value):
    """Whether ``value`` is a string that ``float`` reads (``"1.5"``, ``" 2e3"``, ``"nan"``)."""
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def _numeric_strings(values):
    """Whether the present entries of a 1-D object array are numbers, some of them written as strings."""
    values = np.asarray(values, dtype=object)
    present = values[~np.asarray(pd.isna(values), dtype=bool)].tolist()
    return (any(isinstance(v, str) for v in present)
            and all(_is_number(v) or _is_numeric_string(v) for v in present))


def _warn_numeric_strings(as_numbers, as_categories):
    """Say how columns of numbers written as strings were read: never a silent choice."""
    if as_numbers:
        warn_user(
            f"X's column(s) {', '.join(as_numbers[:5])}{' ...' if len(as_numbers) > 5 else ''} hold numbers "
            "written as strings (an array with a string column stores every column as strings or objects); "
            "they are read as numbers. To read such a column as categories, pass a DataFrame with that column "
            "of dtype 'category'.", UserWarning,
        )
    if as_categories:
        warn_user(
            f"X's column(s) {', '.join(as_categories[:5])}{' ...' if len(as_categories) > 5 else ''} hold "
            "numbers written as strings; as the column's dtype (object or string) says, they are read as "
            "categories, whose order says nothing of their values. To read them as numbers, convert them "
            "(pandas.to_numeric); to keep them as categories without this warning, give them the dtype "
            "'category'.", UserWarning,
        )


# --------------------------------------------------------------------------
# 1. any table -> float matrix
# --------------------------------------------------------------------------
class TransformToNumerical(TransformerMixin, BaseEstimator):
    """Encode a table of mixed column types as a float64 matrix.

    Each input column gives exactly one output column (nothing is dropped):

    * categorical columns -- pandas ``category``, ``object``, string
      (including :class:`pandas.StringDtype`), nullable ``boolean``, and
      columns of a NumPy array holding strings that are not all numbers -- become ordinal codes
      ``0 .. n_categories - 1`` following the sorted categories seen in
      ``fit`` (as scikit-learn's ``OrdinalEncoder``); missing values (NaN,
      ``pd.NA``, ``NaT``) and categories unseen in ``fit`` become ``-1``
      (missing is a category of its own). As in scikit-learn, and hence in
      the official encoder, a ``None`` stored in an object column is an
      ordinary category sorted after all others. A DataFrame column of dtype
      ``object`` or string holding only numbers written as strings stays
      categorical, as its dtype says, with a :class:`UserWarning`;
    * numeric columns (including NumPy ``bool``, nullable integers and floats,
      and columns of a NumPy array whose strings all read as numbers, such
      as ``"1.5"``: a :class:`UserWarning` says so) are imputed with their
      training mean; a column that is entirely missing
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
        # object column of a NumPy array: numeric when every present value is a number, or a number
        # written as a string (a NumPy array with one string column holds every column as objects)
        present = column[~np.asarray(pd.isna(column), dtype=bool)]
        if all(_is_number(v) for v in present.tolist()) or _numeric_strings(column):
            return "numeric"
        return "categorical"

    @staticmethod
    def _holds_numeric_strings(column, kind):
        """Whether a column of kind ``kind`` holds only numbers written as strings."""
        if kind not in ("numeric", "categorical"):
            return False
        if isinstance(column, pd.Series):
            dtype = column.dtype
            if kind == "numeric" or isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_bool_dtype(dtype):
                return False
            return _numeric_strings(column.to_numpy(dtype=object))
        return column.dtype.kind == "O" and _numeric_strings(column)

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
        as_numbers, as_categories = [], []
        for j, column in enumerate(columns):
            kind = self._infer_kind(column)
            self.column_kinds_.append(kind)
            if self._holds_numeric_strings(column, kind):
                (as_numbers if kind == "numeric" else as_categories).append(_column_label(labels, j))
            if kind == "categorical":
                values = self._object_values(column)
                present = values[~_category_missing(values)]
                self.categories_.append(_sort_categories(present.tolist()))
                self.fill_values_[j] = -1.0
            else:
                self.categories_.append(None)
                mean = _safe_nanmean(self._float_values(column, kind, _column_label(labels, j)))
                self.fill_values_[j] = 0.0 if np.isnan(mean) else mean
        _warn_numeric_strings(as_numbers, as_categories)
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
            warn_user(f"X has feature names, but {type(self).__name__} was fitted without feature names")
        elif not is_frame and fitted_names is not None:
            warn_user(
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
