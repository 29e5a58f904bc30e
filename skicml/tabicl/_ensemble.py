"""TabICL's ensemble: column orders, class shifts and the member configurations.

* :func:`latin_square_permutations` and :func:`feature_permutations` give the
  column orders of the ensemble members; the Latin square is built without
  recursion (upstream #9) and is lazy, so thousands of features are cheap.
* :class:`EnsembleGenerator` draws the ensemble members (normalisation
  method, column permutation, class offset) exactly as the official v0.1.4
  ``_generate_ensemble`` does for the same integer ``random_state`` (or, with
  ``member_draw="v2"``, as the 2.x one does) and caches
  the transformed training matrix per normalisation method; with
  ``pca_components`` every other group of members sees the principal view.
"""

from __future__ import annotations

import itertools
import numbers
import operator
import random
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from ._encoding import UniqueFeatureFilter
from ._normalization import NORM_METHODS, PreprocessingPipeline, PrincipalProjection, _resolve_seed

__all__ = ["MEMBER_DRAWS", "SHUFFLE_METHODS", "EnsembleGenerator", "feature_permutations",
           "latin_square_permutations"]

#: Column-permutation strategies understood by :func:`feature_permutations`.
SHUFFLE_METHODS = ("none", "shift", "random", "latin")
#: Key prefix of the ensemble members that see the principal-component view.
PCA_VIEW = "pca:"
#: Official releases whose drawing of the members :class:`EnsembleGenerator` reproduces.
MEMBER_DRAWS = ("v1", "v2")


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------
def _python_rng(random_state):
    """A :class:`random.Random` for ``random_state`` (an instance is used as is)."""
    if isinstance(random_state, random.Random):
        return random_state
    return random.Random(_resolve_seed(random_state))


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

    ``member_draw`` picks which official release's class offsets these are.
    ``"v1"`` (tabicl 0.1.x): a random order of the ``K`` offsets, drawn from
    the stream that then shuffles the pairs. ``"v2"`` (tabicl 2.x, whose
    ``Shuffler(method="shift")`` gives the ``K`` cyclic shifts of the classes
    in order): the offsets ``0, K-1, K-2, ..., 1`` (shift ``i`` relabels class
    ``c`` as ``c - i``), drawn from nothing, so the stream only shuffles the
    pairs. Without class shifts (regression, ``class_shift=False``) both are
    the same draw.

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
    member_draw : {"v1", "v2"}, default="v1"
        The official release whose class offsets to reproduce (see above);
        the estimators pick ``"v2"`` for TabICL v2 networks.
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
                 outlier_threshold=4.0, random_state=None, pca_components=None, categorical_features=None,
                 member_draw="v1"):
        self.n_estimators = n_estimators
        self.norm_methods = norm_methods
        self.feat_shuffle_method = feat_shuffle_method
        self.class_shift = class_shift
        self.outlier_threshold = outlier_threshold
        self.random_state = random_state
        self.pca_components = pca_components
        self.categorical_features = categorical_features
        self.member_draw = member_draw

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
        if self.member_draw not in MEMBER_DRAWS:
            raise ValueError(f"member_draw must be one of {MEMBER_DRAWS}, got {self.member_draw!r}.")
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

        # official _generate_ensemble: its own Random for the class offsets (v1
        # only) and the shuffle, a separate one (same seed) inside the feature shuffler
        rng = random.Random(self.seed_)
        patterns = views[""][1]
        if not (self.class_shift and self.n_estimators > 1):
            offsets = [0]
        elif self.member_draw == "v1":
            offsets = rng.sample(range(n_classes), n_classes)
        else:  # v2: cyclic shift i maps class c to c - i, for i = 0 .. K-1
            offsets = [-i % n_classes for i in range(n_classes)]
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
