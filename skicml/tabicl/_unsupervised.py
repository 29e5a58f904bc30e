"""TabICL without labels: imputation, outlier scores and synthetic rows by the chain rule.

A table's joint density factors over any column order ``pi``::

    p(x) = p(x_pi1) p(x_pi2 | x_pi1) ... p(x_pid | x_pi1, ..., x_pi(d-1))

and every factor is an in-context prediction: TabICL's regressor (its
quantile head) for a numeric column, its classifier for a categorical one,
with the training rows where that column is observed as the context. This is
the decomposition of the official ``tabicl`` 2.2.0 ``TabICLUnsupervised``;
the estimators here put it in scikit-learn's forms:

* :class:`TabICLImputer` (a transformer) fills each missing cell with the
  prediction of its column from all the other columns, over ``max_iter``
  rounds, as the official ``impute`` does;
* :class:`TabICLOutlierDetector` (an outlier detector, like
  ``IsolationForest``) scores rows by their log joint density averaged over
  ``n_permutations`` column orders, and draws synthetic rows with
  :meth:`~TabICLOutlierDetector.sample`.

Every conditional is a fitted :class:`~skicml.tabicl.TabICLRegressor` or
:class:`~skicml.tabicl.TabICLClassifier` (the shared ensemble, member
contexts and in-context caches of :mod:`._inference`), built once at ``fit``
and sharing one network per kind, so that ``transform`` and
``score_samples`` only run the new rows through cached contexts. What
differs from the official estimator, and why:

* ``fit`` builds the contexts (the official ``fit`` only stores the table and
  re-encodes it for every conditional of every call);
* ``n_permutations`` orders are used (the official one uses one order per
  column whatever it is asked, so its cost grows with the square of the
  number of columns), and a conditional met in two orders is built once;
* a missing cell contributes nothing to the density (the official one scores
  a missing numeric value with the density of its last segment);
* numeric densities are taken in the column's standardised units (its
  training mean and standard deviation), so scores are unit-free and the
  density's clamps do not depend on units; the official value in raw units
  is this one minus ``log(std)`` per numeric column;
* the first column of an order (no conditioning column) is predicted from
  one standard-normal noise column in the context, as officially, but new
  rows read it at fixed probe values (averaged), not at fresh noise, so
  that a row's score does not depend on the rows scored with it.
"""

from __future__ import annotations

import numbers
import os
import warnings

import numpy as np
import pandas as pd
import torch
from scipy.stats import norm
from sklearn.base import BaseEstimator, OutlierMixin, TransformerMixin
from sklearn.utils.validation import _check_feature_names_in, check_is_fitted, validate_data

from ..base import TorchEstimatorMixin, seed_from_random_state
from ..utils.param_validation import Integral, Interval, Real, StrOptions, fit_context, shared_constraints
from ._classifier import _PRECISIONS, TabICLClassifier, load_tabicl_model
from ._normalization import NORM_METHODS
from ._quantiles import QuantileDistribution
from ._regressor import TabICLRegressor

__all__ = ["TabICLImputer", "TabICLOutlierDetector"]

#: Fewest observed training values a column needs for an in-context conditional
#: (the official ``_MIN_SAMPLES_PER_CONDITIONAL``); below it a simple statistic is used.
MIN_CONTEXT = 5
#: Log-probability of a value a column never showed at ``fit`` (an unseen
#: category, or another value of a constant column): ``log(1e-10)``, the official floor.
LOG_FLOOR = float(np.log(1e-10))
#: Clamps of the quantile function's slope (official ``MIN_SLOPE``, ``MAX_SLOPE``).
_MIN_SLOPE, _MAX_SLOPE = 1e-6, 1e6
#: Values of the noise column at which a marginal (a conditional with no
#: conditioning column) is read: the midpoints of 16 equal-probability bins of N(0, 1).
_PROBES = norm.ppf((np.arange(16) + 0.5) / 16)
#: Bytes of in-context caches the conditionals of one estimator may hold with ``cache="auto"``.
_AUTO_CACHE_BYTES = 2 * 1024**3


# --------------------------------------------------------------------------
# density of a quantile function
# --------------------------------------------------------------------------
def quantile_log_density(dist, z):
    """``log f(z)`` of a :class:`~._quantiles.QuantileDistribution`, one value per distribution.

    The official ``QuantileDistribution.log_prob`` with exponential tails:
    ``log f(z) = -log Q'(F(z))``, the slope of the linearly interpolated
    quantile function on the segment holding ``z`` (``Q'`` clamped to
    ``[1e-6, 1e6]``) and ``log(alpha) - log(beta)`` in the tails.

    Parameters
    ----------
    dist : QuantileDistribution
        Batch shape ``(n,)``.
    z : Tensor of shape (n,)

    Returns
    -------
    Tensor of shape (n,)
    """
    q, levels = dist.quantiles, dist.levels
    z = z.to(q.dtype).unsqueeze(-1)
    first, last = q[..., :1], q[..., -1:]
    segment = (torch.searchsorted(q[..., :-1].contiguous(), z.contiguous(), right=True) - 1)
    segment = segment.clamp(0, q.shape[-1] - 2)
    width = (levels[1:] - levels[:-1])[segment]
    slope = (q.gather(-1, segment + 1) - q.gather(-1, segment)) / width
    beta_left, beta_right = dist.beta_left.unsqueeze(-1), dist.beta_right.unsqueeze(-1)
    alpha_left, alpha_right = levels[0], levels[-1]
    # tails: alpha = alpha_L exp((z - q_1) / beta_L), Q'(alpha) = beta_L / alpha (and mirrored)
    left = alpha_left * torch.exp(((z - first) / beta_left).clamp(max=0.0))
    right = (1 - alpha_right) * torch.exp(((last - z) / beta_right).clamp(max=0.0))
    slope = torch.where(z < first, beta_left / left.clamp(min=1e-6),
                        torch.where(z > last, beta_right / right.clamp(min=1e-6), slope))
    return -torch.log(slope.clamp(_MIN_SLOPE, _MAX_SLOPE)).squeeze(-1)


# --------------------------------------------------------------------------
# columns: which are categorical, their levels, their codes
# --------------------------------------------------------------------------
def _is_dataframe(X):
    return hasattr(X, "iloc") and hasattr(X, "dtypes")


def _numeric_kind(dtype):
    return pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)


class _Shared:
    """A private hook: an inner estimator that uses a network loaded once by its owner."""

    def _load(self):
        return self._shared_network.to(self._device()), self._shared_provenance


class _SharedRegressor(_Shared, TabICLRegressor):
    pass


class _SharedClassifier(_Shared, TabICLClassifier):
    pass


class _Conditional:
    """One factor ``p(x_target | x_features)``: an in-context estimator or a simple fallback.

    ``kind`` is ``"regressor"``, ``"classifier"``, ``"constant"`` (one
    observed value) or ``"few"`` (fewer than :data:`MIN_CONTEXT` observed
    values: the column's mean or mode, and no density term). ``features``
    is a tuple of column indices; empty for a marginal, whose context reads
    one noise column.
    """

    def __init__(self, owner, target, features, X, seed):
        self.target, self.features = target, tuple(features)
        self.categorical = bool(owner.categorical_[target])
        self.n_levels = len(owner.categories_[target]) if self.categorical else 0
        observed = ~np.isnan(X[:, target])
        values = X[observed, target]
        self.mean, self.scale = owner.column_mean_[target], owner.column_scale_[target]
        self.fill = owner.initial_fill_[target]
        if np.unique(values).size == 1:
            self.kind, self.value = "constant", float(values[0])
            return
        if observed.sum() < MIN_CONTEXT:
            self.kind, self.value = "few", self.fill
            return
        self.kind = "classifier" if self.categorical else "regressor"
        estimator = owner._inner(self.kind, seed)
        if self.features:
            X_context = X[observed][:, list(self.features)]
        else:
            X_context = np.random.RandomState(seed).standard_normal((observed.sum(), 1))
        y = values.astype(np.int64) if self.categorical else values
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=UserWarning)
            self.estimator = estimator.fit(X_context, y)
        if not self.features:  # a marginal: the same distribution for every row, computed once
            probes = _PROBES[:, None]
            if self.categorical:
                self.marginal = self._proba_of(probes).mean(0)
            else:
                self.marginal = self.estimator.predict(probes, output="raw_quantiles").mean(0)

    # -- what the estimator says about rows -------------------------------------
    def _query(self, X):
        return X[:, list(self.features)]

    def _proba_of(self, X_features):
        """Probabilities (n, n_levels) over every level of the column (absent ones 0)."""
        proba = self.estimator.predict_proba(X_features)
        out = np.zeros((len(proba), self.n_levels))
        out[:, self.estimator.classes_.astype(np.int64)] = proba
        return out

    def proba(self, X):
        if not self.features:
            return np.tile(self.marginal, (len(X), 1))
        return self._proba_of(self._query(X))

    def quantiles(self, X):
        """The members' averaged quantiles (n, Q) in the column's units."""
        if not self.features:
            return np.tile(self.marginal, (len(X), 1))
        return self.estimator.predict(self._query(X), output="raw_quantiles")

    def point(self, X, estimate):
        """The conditional mean or median (numeric), or mode (categorical), of each row."""
        if self.kind in ("constant", "few"):
            return np.full(len(X), self.value)
        if self.categorical:
            return np.argmax(self.proba(X), axis=1).astype(np.float64)
        if not self.features:
            dist = QuantileDistribution(torch.from_numpy(self.marginal[None]))
            value = float(dist.mean()[0] if estimate == "mean" else dist.median()[0])
            return np.full(len(X), value)
        return self.estimator.predict(self._query(X), output=estimate)

    def log_density(self, X, values):
        """``log p(value | features)`` of each row; 0 where the value is missing.

        Numeric densities are in the column's standardised units.
        """
        out = np.zeros(len(X))
        present = ~np.isnan(values)
        if self.kind == "few" or not present.any():
            return out
        if self.kind == "constant":
            out[present] = np.where(values[present] == self.value, 0.0, LOG_FLOOR)
            return out
        X, values = X[present], values[present]
        if self.categorical:
            codes = values.astype(np.int64)
            known = (codes >= 0) & (codes < self.n_levels)
            p = np.full(len(codes), 1e-10)
            p[known] = self.proba(X)[known, codes[known]]
            out[present] = np.log(np.maximum(p, 1e-10))
            return out
        q = torch.from_numpy((self.quantiles(X) - self.mean) / self.scale)
        z = torch.from_numpy((values - self.mean) / self.scale)
        out[present] = quantile_log_density(QuantileDistribution(q), z).numpy()
        return out

    def sample(self, X, rng):
        """One draw per row from the conditional (inverse-CDF sampling, tails included)."""
        n = len(X)
        if self.kind in ("constant", "few"):
            return np.full(n, self.value)
        u = rng.random_sample(n)
        if self.categorical:
            cumulative = np.cumsum(self.proba(X), axis=1)
            cumulative /= cumulative[:, -1:]
            return np.minimum((u[:, None] >= cumulative).sum(1), self.n_levels - 1).astype(np.float64)
        dist = QuantileDistribution(torch.from_numpy(self.quantiles(X)))
        return dist.icdf(torch.from_numpy(u).unsqueeze(-1)).squeeze(-1).numpy()


class _ChainRuleBase(TorchEstimatorMixin, BaseEstimator):
    """Columns, networks and conditionals shared by the imputer and the outlier detector."""

    _parameter_constraints = {
        "categorical_features": [StrOptions({"auto"}), "array-like", None],
        "max_categories": [Interval(Integral, 1, None, closed="left")],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "norm_methods": [StrOptions(set(NORM_METHODS)), "array-like", None],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "inference_precision": [StrOptions(set(_PRECISIONS))],
        "cache": [StrOptions({"auto"}), "boolean"],
        "pretrained_classifier": [str, os.PathLike, None],
        "pretrained_regressor": [str, os.PathLike, None],
        **shared_constraints("device", "random_state", "verbose"),
    }

    # -- input ------------------------------------------------------------------
    def _validate(self, X, reset):
        """``X`` as a float64 array: numbers, or category codes (NaN for missing or unseen)."""
        if _is_dataframe(X):
            validate_data(self, X, skip_check_array=True, reset=reset)
            if X.shape[0] == 0 or X.shape[1] == 0:
                raise ValueError(f"Found array with shape {X.shape}; at least 1 sample and 1 feature are "
                                 "required.")
            columns = [X.iloc[:, j] for j in range(X.shape[1])]
            if reset:
                self._numeric_columns = [_numeric_kind(c.dtype) for c in columns]
                self._dtypes, self._column_labels = list(X.dtypes), list(X.columns)
            for j, column in enumerate(columns):
                if self._numeric_columns[j]:
                    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
                    if np.isinf(values).any():
                        raise ValueError(f"Input X contains infinity in column {X.columns[j]!r}.")
                    columns[j] = values
                else:
                    columns[j] = column.to_numpy(dtype=object)
            return columns, True
        X = validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite="allow-nan")
        if reset:
            self._numeric_columns = [True] * X.shape[1]
            self._dtypes = self._column_labels = None
        return [X[:, j] for j in range(X.shape[1])], False

    def _fit_columns(self, X):
        columns, frame = self._validate(X, reset=True)
        n, d = len(columns[0]), len(columns)
        if n < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 samples to learn in context, "
                             f"got n_samples = {n}.")
        categorical = self._categorical_mask(columns, frame)
        self.categorical_ = categorical
        self.categories_ = []
        for j, column in enumerate(columns):
            missing = pd.isna(column)
            if missing.all():
                name = self.feature_names_in_[j] if hasattr(self, "feature_names_in_") else j
                raise ValueError(
                    f"Column {name!r} of X is missing in every row: there is nothing to learn it from. "
                    "Drop it before this estimator (or fill it with a constant)."
                )
            self.categories_.append(np.unique(column[~missing]) if categorical[j] else None)
        X_num = self._encode(columns)
        self.column_mean_ = np.nanmean(X_num, axis=0)
        scale = np.nanstd(X_num, axis=0)
        self.column_scale_ = np.where(scale > 0, scale, 1.0)
        self.initial_fill_ = np.array([self._initial(X_num[:, j], categorical[j]) for j in range(d)])
        self._networks = {}
        return X_num

    def _categorical_mask(self, columns, frame):
        d = len(columns)
        spec = self.categorical_features
        mask = np.array([not numeric for numeric in self._numeric_columns])
        if isinstance(spec, str):  # "auto": integer-valued with at most max_categories levels (official rule)
            for j, column in enumerate(columns):
                if mask[j]:
                    continue
                observed = column[~np.isnan(column)]
                mask[j] = (observed.size > 0 and not np.any(observed % 1.0)
                           and np.unique(observed).size <= self.max_categories)
            return mask
        if spec is None:
            return mask
        spec = np.asarray(spec)
        if spec.dtype == bool:
            if spec.shape != (d,):
                raise ValueError(f"categorical_features has {spec.size} booleans for {d} columns.")
            return mask | spec
        if spec.dtype.kind in "iu":
            if spec.size and (spec.min() < -d or spec.max() >= d):
                raise ValueError(f"categorical_features holds column indices outside [0, {d}): {spec.tolist()}.")
            mask[spec] = True
            return mask
        if hasattr(self, "feature_names_in_"):
            names = list(self.feature_names_in_)
            unknown = [name for name in spec.tolist() if name not in names]
            if unknown:
                raise ValueError(f"categorical_features names columns X does not have: {unknown}.")
            mask[[names.index(name) for name in spec.tolist()]] = True
            return mask
        raise ValueError("categorical_features as column names needs X as a DataFrame with string column names.")

    def _encode(self, columns):
        """Numbers as they are, categories as codes into ``categories_`` (unseen ones NaN)."""
        out = np.empty((len(columns[0]), len(columns)))
        for j, column in enumerate(columns):
            levels = self.categories_[j]
            if levels is None:
                out[:, j] = column.astype(np.float64)
                continue
            missing = pd.isna(column)
            codes = np.full(len(column), np.nan)
            if levels.dtype == object:
                lookup = {value: code for code, value in enumerate(levels.tolist())}
                codes[~missing] = [lookup.get(value, np.nan) for value in column[~missing]]
            else:
                values = column[~missing].astype(levels.dtype)
                index = np.clip(np.searchsorted(levels, values), 0, len(levels) - 1)
                codes[~missing] = np.where(levels[index] == values, index, np.nan)
            out[:, j] = codes
        return out

    def _unseen(self, columns, X_num):
        """Cells holding a value (not missing) that ``_encode`` could not code: unseen categories."""
        return np.column_stack([~pd.isna(c) & np.isnan(X_num[:, j]) for j, c in enumerate(columns)])

    def _decode(self, X_num, frame, index=None):
        """Codes back to their levels; a DataFrame in the input's dtypes when the input had non-numeric columns."""
        categorical = [j for j, levels in enumerate(self.categories_) if levels is not None]
        if not frame or all(self._numeric_columns):
            out = X_num.copy()
            for j in categorical:
                levels = self.categories_[j]
                if levels.dtype != object:
                    known = ~np.isnan(out[:, j])
                    out[known, j] = levels[out[known, j].astype(np.int64)]
            return out
        data = {}
        for j, name in enumerate(self._column_labels):
            values = X_num[:, j]
            if self.categories_[j] is not None:
                known = ~np.isnan(values)
                decoded = np.full(len(values), None, dtype=object)
                decoded[known] = self.categories_[j][values[known].astype(np.int64)]
                values = decoded
            data[name] = pd.Series(values, index=index)
            if True:
                try:
                    data[name] = data[name].astype(self._dtypes[j])
                except (TypeError, ValueError):
                    pass
        return pd.DataFrame(data, index=index)

    @staticmethod
    def _initial(column, categorical, strategy="median"):
        observed = column[~np.isnan(column)]
        if categorical or strategy == "most_frequent":
            values, counts = np.unique(observed, return_counts=True)
            return float(values[np.argmax(counts)])
        if strategy == "mean":
            return float(observed.mean())
        return float(np.median(observed))

    # -- networks and conditionals ---------------------------------------------
    def _fit_seed(self):
        if isinstance(self.random_state, numbers.Integral):
            return int(self.random_state)
        return seed_from_random_state(self.random_state)

    def _network(self, kind):
        """The network of ``kind`` ("classifier" or "regressor"), loaded once per fit."""
        if kind not in self._networks:
            source = self.pretrained_classifier if kind == "classifier" else self.pretrained_regressor
            owner = TabICLClassifier if kind == "classifier" else TabICLRegressor
            if source is None:
                network, provenance = owner._random_network(self._seed_)
            else:
                network, provenance = load_tabicl_model(source)
            self._networks[kind] = (network.to(_PRECISIONS[self.inference_precision]), provenance)
        return self._networks[kind]

    def _inner(self, kind, seed):
        network, provenance = self._network(kind)
        common = dict(n_estimators=self.n_estimators, norm_methods=self.norm_methods, batch_size=self.batch_size,
                      inference_precision=self.inference_precision, cache=self._inner_cache, device=self.device,
                      random_state=seed, verbose=self.verbose)
        if kind == "classifier":
            # the official inner classifier: its temperature, no principal view
            estimator = _SharedClassifier(softmax_temperature=0.9, pca_components=None, **common)
        else:
            estimator = _SharedRegressor(**common)
        estimator._shared_network, estimator._shared_provenance = network, provenance
        return estimator

    def _build(self, X_num, plan):
        """Fit the conditionals of ``plan`` (a list of (target, features)), each once."""
        self._seed_ = self._fit_seed()
        n_context = int((~np.isnan(X_num)).sum(0).max())
        needed = {("classifier" if self.categorical_[t] else "regressor") for t, _ in plan}
        if self.cache == "auto":
            total = sum(self._network(kind)[0].context_nbytes(n_context) for kind in needed)
            self._inner_cache = total * self.n_estimators * len(plan) < _AUTO_CACHE_BYTES
        else:
            self._inner_cache = bool(self.cache)
        conditionals = {}
        for target, features in plan:
            key = (int(target), tuple(sorted(int(f) for f in features)))
            if key not in conditionals:
                conditionals[key] = _Conditional(self, key[0], key[1], X_num, self._seed_)
        del self._inner_cache
        return conditionals

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_networks", None)  # the inner estimators hold them
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        return tags


_COMMON_DOC = """
    categorical_features : "auto", array-like of int, bool or str, or None, default="auto"
        Columns predicted by the classifier (and read as codes). ``"auto"``:
        non-numeric DataFrame columns and integer-valued columns with at most
        ``max_categories`` distinct values (the official rule); indices, a
        boolean mask or column names add to the non-numeric ones.
    max_categories : int, default=10
    n_estimators : int, default={n_estimators}
        Ensemble members of every conditional (column orders and
        normalisations, as in :class:`TabICLRegressor`).
    norm_methods : str, list of str or None, default=None
        As in :class:`TabICLRegressor`; ``None`` is ``["none", "power"]``.
    batch_size : int or None, default=8
        Members per forward pass; bounds memory, not results.
    inference_precision : {{"float32", "float64", "bfloat16"}}, default="float32"
    cache : {{"auto", True, False}}, default="auto"
        Keep every conditional's in-context keys and values from ``fit``, so
        that new rows alone run through the network. ``"auto"``: when all of
        them take under 2 GB; without it every call re-encodes the contexts.
    pretrained_classifier : str, path-like or None, default="tabicl-small"
        The network of categorical columns (a shipped name or a checkpoint
        path, as ``TabICLClassifier``'s ``pretrained``; ``None``: random weights).
    pretrained_regressor : str, path-like or None, default="tabicl-regressor-small"
        The network of numeric columns (as ``TabICLRegressor``'s ``pretrained``).
    device : str, default="auto"
    random_state : int, RandomState instance or None, default=None
        Seeds the members, the column orders and the noise column of the
        marginals (an integer is used as the official estimators use it).
    verbose : int or "auto", default="auto"
        Progress of each column's in-context predictor, as in
        :class:`TabICLClassifier`: ``"auto"`` shows a bar only once a step
        has run for a few seconds, and clears it at the end; ``0`` is silent.
"""


class TabICLImputer(TransformerMixin, _ChainRuleBase):
    """Fill missing values by in-context prediction of each column from the others (TabICL).

    ``fit`` builds, for every column, the in-context predictor of that column
    from all the other columns: TabICL's regressor for a numeric column, its
    classifier for a categorical one, with the training rows where the
    column is observed as the context (their own missing cells are
    mean-imputed inside, as the official estimator does). ``transform``
    first fills the missing cells with ``initial_strategy``, then, for
    ``max_iter`` rounds and column by column (``imputation_order``), replaces
    them with the prediction from the row's current values: the official
    ``TabICLUnsupervised.impute`` (``n_iterations=max_iter``, the median),
    with the contexts built once at ``fit`` and cached. Observed cells are
    never changed; categorical cells get one of the levels seen at ``fit``.

    Parameters
    ----------
    max_iter : int, default=2
        Rounds over the incomplete columns (``0``: the initial fill only).
    initial_strategy : {{"median", "mean", "most_frequent"}}, default="median"
        The first fill of numeric cells (categorical ones get the most
        frequent level), as in ``IterativeImputer``.
    imputation_order : {{"ascending", "descending", "roman", "arabic"}}, default="ascending"
        Order of the columns within a round: by increasing or decreasing
        fraction of missing cells in the rows transformed (as officially),
        left to right, or right to left.
    estimate : {{"mean", "median"}}, default="mean"
        The statistic of a numeric cell's predicted distribution: the mean
        minimises the squared error; the median is the official choice.
{common}
    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when ``X`` has string column names.
    categorical_ : ndarray of bool
        Which columns are categorical.
    categories_ : list of (ndarray or None)
        Levels of each categorical column (``None`` for numeric ones).
    initial_fill_ : ndarray
        Initial value of each column (a level's code for categorical ones).
    n_iter_ : int
        Rounds ``transform`` runs (``max_iter``: the contexts do not change
        between rounds, so there is no convergence test).
    conditionals_ : list
        The fitted predictor of each column (private objects).

    See Also
    --------
    TabICLOutlierDetector : the joint density of the same conditionals.
    sklearn.impute.IterativeImputer : the same rounds with a regressor fitted per column.

    Notes
    -----
    A column with one observed value is filled with it; one with fewer than
    5 observed values with its mean (categorical: most frequent level), as
    officially. A column missing in every training row raises. Unseen
    categories in ``transform`` are left as they are in the output and read
    as missing when predicting other columns.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.tabicl import TabICLImputer
    >>> rng = np.random.RandomState(0)
    >>> X = rng.normal(size=(60, 3)); X[:, 2] = X[:, 0] + X[:, 1]
    >>> X[::7, 2] = np.nan
    >>> imputer = TabICLImputer(n_estimators=2, random_state=0).fit(X)
    >>> bool(np.isnan(imputer.transform(X)).any())
    False
    """

    _parameter_constraints = {
        **_ChainRuleBase._parameter_constraints,
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "initial_strategy": [StrOptions({"median", "mean", "most_frequent"})],
        "imputation_order": [StrOptions({"ascending", "descending", "roman", "arabic"})],
        "estimate": [StrOptions({"mean", "median"})],
    }

    def __init__(self, max_iter=2, initial_strategy="median", imputation_order="ascending", estimate="mean",
                 categorical_features="auto", max_categories=10, n_estimators=8, norm_methods=None, batch_size=8,
                 inference_precision="float32", cache="auto", pretrained_classifier="tabicl-small",
                 pretrained_regressor="tabicl-regressor-small", device="auto", random_state=None, verbose="auto"):
        self.max_iter = max_iter
        self.initial_strategy = initial_strategy
        self.imputation_order = imputation_order
        self.estimate = estimate
        self.categorical_features = categorical_features
        self.max_categories = max_categories
        self.n_estimators = n_estimators
        self.norm_methods = norm_methods
        self.batch_size = batch_size
        self.inference_precision = inference_precision
        self.cache = cache
        self.pretrained_classifier = pretrained_classifier
        self.pretrained_regressor = pretrained_regressor
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Build the in-context predictor of every column from the others.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Missing values as NaN (or pandas' missing markers).
        y : None
            Ignored.

        Returns
        -------
        self : TabICLImputer
        """
        X_num = self._fit_columns(X)
        d = X_num.shape[1]
        self.initial_fill_ = np.array([self._initial(X_num[:, j], self.categorical_[j], self.initial_strategy)
                                       for j in range(d)])
        plan = [(j, [k for k in range(d) if k != j]) for j in range(d)]
        built = self._build(X_num, plan)
        self.conditionals_ = [built[j, tuple(k for k in range(d) if k != j)] for j in range(d)]
        self.n_iter_ = self.max_iter
        return self

    def transform(self, X):
        """Fill the missing cells of ``X``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_features), or DataFrame
            Float64 when every column is numeric; a DataFrame in the input's
            dtypes when ``X`` was a DataFrame with non-numeric columns.
        """
        check_is_fitted(self)
        columns, frame = self._validate(X, reset=False)
        X_num = self._encode(columns)
        unseen = self._unseen(columns, X_num)
        missing = np.isnan(X_num) & ~unseen
        X_imp = np.where(missing, self.initial_fill_[None, :], X_num)
        order = self._order(missing)
        with torch.inference_mode():
            for _ in range(self.max_iter):
                for j in order:
                    rows = missing[:, j]
                    X_imp[rows, j] = self.conditionals_[j].point(X_imp[rows], self.estimate)
        out = self._decode(X_imp, frame, index=X.index if frame else None)
        if unseen.any():  # unseen categories are returned as they came
            if isinstance(out, pd.DataFrame):
                for j in np.flatnonzero(unseen.any(0)):
                    out.iloc[np.flatnonzero(unseen[:, j]), j] = columns[j][unseen[:, j]]
            else:
                out[unseen] = np.column_stack(columns)[unseen]
        return out

    def _order(self, missing):
        incomplete = np.flatnonzero(missing.any(0))
        if self.imputation_order == "roman":
            return incomplete
        if self.imputation_order == "arabic":
            return incomplete[::-1]
        rate = missing.mean(0)[incomplete]
        order = incomplete[np.argsort(rate, kind="stable")]
        return order if self.imputation_order == "ascending" else order[::-1]

    def get_feature_names_out(self, input_features=None):
        """The input's column names (the imputer adds and drops no column)."""
        check_is_fitted(self)
        return _check_feature_names_in(self, input_features)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags


class TabICLOutlierDetector(OutlierMixin, _ChainRuleBase):
    """Outlier scores from TabICL's joint density over column orders, and synthetic rows.

    ``fit`` draws ``n_permutations`` column orders and builds every factor of
    the chain rule along them, ``p(x_pik | x_pi1, ..., x_pi(k-1))``, as an
    in-context prediction (TabICL's regressor for a numeric column, its
    classifier for a categorical one; the training rows where that column is
    observed are the context). ``score_samples`` is the row's log joint
    density, averaged over the orders: higher is more normal, as for
    ``IsolationForest``; :meth:`sample` draws new rows factor by factor.

    Parameters
    ----------
    n_permutations : int, default=4
        Column orders to average over; the first is the columns' own order.
        Up to the number of columns they are rows of a random Latin square
        (each column at each position at most once), beyond it random orders.
    contamination : float in (0, 0.5], default=0.1
        Fraction of training rows ``predict`` calls outliers: ``offset_`` is
        that quantile of the training rows' scores.
{common}
    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of str
    categorical_ : ndarray of bool
    categories_ : list of (ndarray or None)
    orderings_ : ndarray of shape (n_permutations, n_features)
    offset_ : float
        ``decision_function = score_samples - offset_``.
    conditionals_ : dict
        The fitted factors, by ``(column, conditioning columns)`` (private objects).

    Notes
    -----
    Numeric densities are in each column's standardised units (the training
    mean and standard deviation), so the score does not change when a column
    is rescaled; the density in raw units is lower by the sum of the
    numeric columns' log standard deviations. A missing cell contributes
    nothing. A value a categorical column never took at ``fit`` (or another
    value of a constant column) contributes ``log(1e-10)``; a column with
    fewer than 5 observed training values contributes nothing. The
    training rows are scored with themselves in the context (as
    ``IsolationForest`` scores its training rows), which favours them a
    little over new rows of the same distribution.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.tabicl import TabICLOutlierDetector
    >>> rng = np.random.RandomState(0)
    >>> X = rng.normal(size=(80, 2))
    >>> detector = TabICLOutlierDetector(n_permutations=2, n_estimators=2, random_state=0).fit(X)
    >>> detector.predict([[0.0, 0.0], [6.0, -6.0]]).tolist()
    [1, -1]
    >>> detector.sample(3, random_state=0).shape
    (3, 2)
    """

    _parameter_constraints = {
        **_ChainRuleBase._parameter_constraints,
        "n_permutations": [Interval(Integral, 1, None, closed="left")],
        "contamination": [Interval(Real, 0, 0.5, closed="right")],
    }

    def __init__(self, n_permutations=4, contamination=0.1, categorical_features="auto", max_categories=10,
                 n_estimators=4, norm_methods=None, batch_size=8, inference_precision="float32", cache="auto",
                 pretrained_classifier="tabicl-small", pretrained_regressor="tabicl-regressor-small",
                 device="auto", random_state=None, verbose="auto"):
        self.n_permutations = n_permutations
        self.contamination = contamination
        self.categorical_features = categorical_features
        self.max_categories = max_categories
        self.n_estimators = n_estimators
        self.norm_methods = norm_methods
        self.batch_size = batch_size
        self.inference_precision = inference_precision
        self.cache = cache
        self.pretrained_classifier = pretrained_classifier
        self.pretrained_regressor = pretrained_regressor
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Draw the column orders, build their conditionals and set ``offset_``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Missing values allowed.
        y : None
            Ignored.

        Returns
        -------
        self : TabICLOutlierDetector
        """
        X_num = self._fit_columns(X)
        d = X_num.shape[1]
        self.orderings_ = _orderings(d, self.n_permutations, self._fit_seed())
        plan = [(order[i], order[:i]) for order in self.orderings_ for i in range(d)]
        self.conditionals_ = self._build(X_num, plan)
        self.offset_ = float(np.percentile(self._score(X_num), 100.0 * self.contamination))
        return self

    def _factors(self, order):
        return [self.conditionals_[int(order[i]), tuple(sorted(int(f) for f in order[:i]))]
                for i in range(len(order))]

    def _score(self, X_num, values=None):
        """Mean over the orders of the summed log-densities; ``values`` (default ``X_num``) are scored,
        ``X_num`` conditions."""
        values = X_num if values is None else values
        total = np.zeros(len(X_num))
        with torch.inference_mode():
            for order in self.orderings_:
                for factor in self._factors(order):
                    total += factor.log_density(X_num, values[:, factor.target])
        return total / len(self.orderings_)

    def score_samples(self, X):
        """Log joint density of each row, averaged over the column orders (higher: more normal).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        columns, _ = self._validate(X, reset=False)
        X_num = self._encode(columns)
        values = X_num.copy()
        values[self._unseen(columns, X_num)] = -1.0  # a code no level has: scored log(1e-10)
        return self._score(X_num, values)

    def decision_function(self, X):
        """``score_samples(X) - offset_``: negative for outliers."""
        return self.score_samples(X) - self.offset_

    def predict(self, X):
        """``-1`` for outliers, ``1`` for inliers."""
        return np.where(self.decision_function(X) < 0, -1, 1)

    def score(self, X, y=None):
        """Mean log joint density of the rows of ``X`` (for model selection)."""
        return float(np.mean(self.score_samples(X)))

    def sample(self, n_samples=1, random_state=None):
        """Draw synthetic rows, column by column along the fitted orders.

        Each row follows one of ``orderings_`` (drawn uniformly); every cell
        is an inverse-CDF draw from its column's predicted distribution
        given the cells drawn before it (a level drawn from the predicted
        probabilities for a categorical column).

        Parameters
        ----------
        n_samples : int, default=1
        random_state : int, RandomState instance or None, default=None

        Returns
        -------
        ndarray of shape (n_samples, n_features), or DataFrame
            As :meth:`TabICLImputer.transform` returns rows.
        """
        check_is_fitted(self)
        if not isinstance(n_samples, numbers.Integral) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}.")
        rng = random_state if isinstance(random_state, np.random.RandomState) else \
            np.random.RandomState(random_state)
        d = self.n_features_in_
        which = rng.randint(len(self.orderings_), size=n_samples)
        out = np.full((n_samples, d), np.nan)
        with torch.inference_mode():
            for index, order in enumerate(self.orderings_):
                rows = np.flatnonzero(which == index)
                if not len(rows):
                    continue
                block = np.full((len(rows), d), np.nan)
                for factor in self._factors(order):
                    block[:, factor.target] = factor.sample(block, rng)
                out[rows] = block
        return self._decode(out, self._dtypes is not None)


def _orderings(n_features, n_permutations, seed):
    """``n_permutations`` column orders: the identity, then rows of a Latin square, then random orders."""
    from ._ensemble import latin_square_permutations

    rng = np.random.RandomState(seed)
    orders = [np.arange(n_features)]
    square = latin_square_permutations(n_features, seed)
    rows = [np.asarray(r) for r in square]
    # the Latin row that starts with column 0 would repeat the identity's first position
    rows = [r for r in rows if r[0] != 0]
    for r in rows[: n_permutations - 1]:
        orders.append(r)
    while len(orders) < n_permutations:
        orders.append(rng.permutation(n_features))
    return np.stack(orders).astype(np.intp)


TabICLImputer.__doc__ = TabICLImputer.__doc__.format(common=_COMMON_DOC.format(n_estimators=8))
TabICLOutlierDetector.__doc__ = TabICLOutlierDetector.__doc__.format(common=_COMMON_DOC.format(n_estimators=4))
