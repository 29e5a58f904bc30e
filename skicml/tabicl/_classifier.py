"""TabICLClassifier and TabICLEmbedder: the scikit-learn face of TabICL."""

from __future__ import annotations

import contextlib
import numbers
import os
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d, validate_data

from .._weights import load_module
from ..base import TorchEstimatorMixin, progress, seeded
from ..utils.param_validation import Integral, Interval, Real, StrOptions, fit_context, shared_constraints
from ..utils.validation import check_no_missing_labels
from ._encoding import TransformToNumerical
from ._ensemble import SHUFFLE_METHODS, EnsembleGenerator
from ._finetune import finetune_network
from ._inference import ROW_CHUNK, EnsembleContext, MemberContexts
from ._model import TabICLModel
from ._model_v2 import V1_CONFIG_KEYS, TabICLv2Model
from ._normalization import NORM_METHODS

__all__ = ["TabICLClassifier", "TabICLEmbedder"]

#: The model ``TabICLClassifier()`` uses by default (``pretrained``).
DEFAULT_MODEL = "tabicl-small"

_PRECISIONS = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}

#: The paper's softmax temperature, also the starting point of ``"auto"``.
OFFICIAL_TEMPERATURE = 0.9
#: ``pca_components="auto"`` with skicml's own (shipped, local or random) networks.
SHIPPED_PCA_COMPONENTS = 16
# Training rows held out (over a few folds) to fit the "auto" temperature,
# and the most rows always kept in the calibration contexts besides them.
_CALIBRATION_ROWS = 512
_CALIBRATION_CONTEXT = 4096


def load_tabicl_model(model_path=None):
    """Build the TabICL network of a shipped name or a checkpoint path.

    The file's config says which network it holds: v1 (:class:`TabICLModel`,
    the official 0.1.x keys) or v2 (:class:`~skicml.tabicl.TabICLv2Model`).
    Returns ``(model, provenance)``; the model is in eval mode on the CPU.
    """
    key = os.fspath(DEFAULT_MODEL if model_path is None else model_path)

    def build(config):
        if not config:
            raise ValueError(
                f"The checkpoint {key!r} has no 'config': TabICL needs the model "
                "configuration saved beside the state dict (official checkpoints have it)."
            )
        return (TabICLModel if set(config) <= V1_CONFIG_KEYS else TabICLv2Model)(**config)

    model, _, provenance = load_module(key, build)
    return model, provenance


def is_official_checkpoint(provenance):
    """Whether a loaded network is one of the published official TabICL checkpoints."""
    return bool(provenance.get("published"))


def _random_tabicl_model(seed):
    """The paper's architecture with random weights (``pretrained=None``)."""
    with seeded(seed):
        model = TabICLModel()
    return model.eval(), {"weights": f"random (seed {seed})"}


def _calibration_folds(X_num, y, seed):
    """Role of each training row in fitting the temperature.

    ``k >= 0``: held out in fold ``k`` (and context for the other folds);
    ``-1``: context of every fold; ``-2``: unused. Rows are ordered by a
    seeded hash of their values, not by their position, so the roles do not
    depend on the order of the rows, and the held-out rows are a random
    sample of the table rather than one region of its feature space. At most
    ``_CALIBRATION_ROWS`` rows are held out, each fold about a quarter of the
    table, every class keeps a row in every context, and large tables keep
    about ``_CALIBRATION_CONTEXT`` context rows (stratified), which bounds the
    cost; a smaller context makes the model a little less confident, so the
    fitted temperature errs on the cautious side.
    """
    n = len(y)
    n_held = min(n, _CALIBRATION_ROWS)
    n_folds = max(1, -(-n_held // -(-n // 4)))
    key = _row_hash(X_num, seed)
    folds = np.full(n, -2)
    for label in np.unique(y):
        rows = np.flatnonzero(y == label)
        held = min(len(rows) - 1, n_held * len(rows) // n)
        kept = max(1, _CALIBRATION_CONTEXT * len(rows) // n)
        order = rows[np.argsort(key[rows], kind="stable")]
        folds[order[:held]] = np.arange(held) % n_folds
        folds[order[held:held + kept]] = -1
    return folds


def _row_hash(X_num, seed):
    """A seeded pseudo-random 64-bit key per row that depends only on the row's values.

    A random projection alone would order rows along one direction of the
    feature space (and hold out one end of it); mixing its bits with
    SplitMix64 scatters the order uniformly.
    """
    direction = np.random.RandomState(seed).standard_normal(X_num.shape[1])
    values = np.nan_to_num(np.asarray(X_num, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    key = (values @ direction + 0.0).view(np.uint64)  # + 0.0 folds -0.0 into 0.0
    with np.errstate(over="ignore"):
        key = key + np.uint64(0x9E3779B97F4A7C15) * np.uint64((seed + 1) % 2**64)
        key = (key ^ (key >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        key = (key ^ (key >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return key ^ (key >> np.uint64(31))


#: The rules of the fine-tuning parameters of TabICLClassifier and TabICLRegressor.
FINETUNE_CONSTRAINTS = {
    "finetune_epochs": [Interval(Integral, 0, None, closed="left")],
    "finetune_lr": [Interval(Real, 0, None, closed="neither")],
    "finetune_validation_fraction": [Interval(Real, 0, 1, closed="neither")],
    "finetune_patience": [Interval(Integral, 1, None, closed="left"), None],
}


def _is_dataframe(X):
    return hasattr(X, "iloc") and hasattr(X, "dtypes")


class _TabICLBase(TorchEstimatorMixin, BaseEstimator):
    """Input validation, preprocessing and the model shared by the TabICL estimators."""

    #: The shipped model of ``pretrained``'s default.
    _default_model = DEFAULT_MODEL
    #: ``seed -> (network, provenance)`` for ``pretrained=None``.
    _random_network = staticmethod(_random_tabicl_model)

    _parameter_constraints = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "feat_shuffle_method": [StrOptions(set(SHUFFLE_METHODS))],
        "outlier_threshold": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "model_path": [str, os.PathLike, None],
        # -1 is every core, -2 all but one...; 0 threads is no count.
        "n_jobs": [Interval(Integral, None, -1, closed="right"), Interval(Integral, 1, None, closed="left"), None],
        **shared_constraints("pretrained", "device", "random_state", "verbose"),
    }

    def _validate_X(self, X, reset):
        if _is_dataframe(X):
            if X.ndim != 2:
                raise ValueError(f"Expected a 2D DataFrame, got {X.ndim} dimensions.")
            validate_data(self, X, skip_check_array=True, reset=reset)
            if X.shape[0] == 0:
                raise ValueError("Found array with 0 sample(s) (shape=(0, %d)) while a minimum of 1 is required."
                                 % X.shape[1])
            if X.shape[1] == 0:
                raise ValueError("Found array with 0 feature(s) while a minimum of 1 is required.")
            return X
        return validate_data(self, X, reset=reset, dtype=None, ensure_all_finite=False,
                             accept_sparse=False, ensure_2d=True, allow_nd=False)

    def _weights_source(self):
        """``pretrained``, or ``model_path`` (its alias) when that is given."""
        pretrained, model_path = self.pretrained, self.model_path
        if model_path is None:
            return pretrained
        # pretrained at its default does not disagree: model_path chose the model.
        same = pretrained is not None and os.fspath(pretrained) in (self._default_model, os.fspath(model_path))
        if not same:
            raise ValueError(
                f"pretrained={pretrained!r} and model_path={model_path!r} name different models; "
                "model_path is an alias of pretrained: pass only one of them."
            )
        return model_path

    def _load(self):
        source = self._weights_source()
        if source is None:
            model, provenance = self._random_network(self._seed())
        else:
            model, provenance = load_tabicl_model(source)
        return model.to(self._device()), provenance

    def _ensemble_seed(self):
        # An integer random_state is used as it is, so that the ensemble equals
        # the official implementation's for the same value.
        if isinstance(self.random_state, numbers.Integral):
            return int(self.random_state)
        return self._seed()

    @contextlib.contextmanager
    def _threads(self):
        """torch's thread count set from ``n_jobs``, restored even on errors."""
        previous = torch.get_num_threads()
        if self.n_jobs is not None:
            cores = os.cpu_count() or 1
            torch.set_num_threads(min(self.n_jobs, cores) if self.n_jobs > 0 else max(1, cores + 1 + self.n_jobs))
        try:
            yield
        finally:
            torch.set_num_threads(previous)

    def _finetune(self, X_num, y, n_classes, seed):
        """Fine-tune ``model_`` on the training table when ``finetune_epochs > 0`` (see :mod:`._finetune`).

        Sets ``finetune_history_`` (``None`` without fine-tuning) and
        ``n_finetune_steps_``. The members of an episode are the first ones
        of the estimator's own ensemble, one per view and normalisation.
        """
        self.finetune_history_, self.n_finetune_steps_ = None, 0
        if self.finetune_epochs == 0 or self._fallback_:
            return
        ensemble_params = self.ensemble_.get_params()
        ensemble_params["n_estimators"] = len(self.ensemble_.members_by_method_)
        dtype = next(self.model_.parameters()).dtype
        network, self.finetune_history_, self.n_finetune_steps_ = finetune_network(
            self, self.model_, X_num, y, n_classes=n_classes, ensemble_params=ensemble_params, seed=seed)
        self.model_ = network.to(dtype)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        return tags


def _encode(encoder, X):
    """``encoder.transform(X)`` of new rows, without the encoder's own feature-name warning.

    The estimator's input check has already said, in its own name, that
    ``X`` lacks (or has) the feature names it was fitted with; the internal
    encoder repeating it under its class name told the user nothing more.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"X (does not have valid|has) feature names, but "
                                r"TransformToNumerical", category=UserWarning)
        return encoder.transform(X)


def _categorical_columns(encoder):
    """Which output columns of a fitted :class:`TransformToNumerical` hold category codes."""
    kinds = np.asarray(encoder.column_kinds_, dtype=object)[encoder.column_order_]
    return kinds == "categorical"


class TabICLClassifier(ClassifierMixin, _TabICLBase):
    """TabICL: in-context learning of tabular classification with a pretrained transformer.

    ``fit`` stores the training table (preprocessed once per ensemble
    member) and encodes it through the network; ``predict_proba`` classifies
    new rows in one forward pass, with no gradient step. By default the model
    shipped with skicml is used (``skicml info`` shows its provenance); pass
    ``pretrained`` (or its alias ``model_path``) to use a checkpoint on disk,
    or the name of a published official checkpoint such as
    ``"tabicl-classifier-v2-20260212.ckpt"`` (fetched once into the Hugging
    Face cache; see :ref:`published_models`).

    Parameters
    ----------
    n_estimators : int, default=32
        Ensemble members; each sees the columns (or, with ``pca_components``,
        every other group of members the principal components) in another
        order, the classes cyclically shifted and one of ``norm_methods``.
        32 is the paper's value and scored better on the accuracy benchmark
        than 16 at every training size; prediction time grows linearly with
        it.
    norm_methods : str, list of str or None, default=None
        Normalisations to ensemble over, among ``"none"``, ``"power"``,
        ``"quantile"``, ``"quantile_rtdl"``, ``"robust"``; ``None`` means
        ``["none", "power"]``.
    feat_shuffle_method : {"latin", "shift", "random", "none"}, default="latin"
        How members reorder the columns (the network is not invariant to it).
    class_shift : bool, default=True
        Give members cyclically shifted class labels.
    outlier_threshold : float, default=4.0
        z-score beyond which values are softly clipped.
    softmax_temperature : float or "auto", default="auto"
        Temperature of the softmax over the members' averaged logits (and
        of every node of the class tree). ``"auto"`` keeps the paper's 0.9
        inside the network and fits one sharpening factor of the final
        log-probabilities at ``fit``, by minimising the log loss of training
        rows held out from the context (up to 512 rows over a few folds, a
        fold's context keeps every class and at most about 4,096 other
        rows); it costs a few extra in-context passes at ``fit``. This calibration is skicml's
        addition (the paper uses 0.9, which reproduces its inference
        exactly): a small pretrained model is underconfident on clean real
        tables and overconfident on noisy ones. With a published official
        checkpoint (``pretrained="tabicl-classifier-v2-20260212.ckpt"``...)
        ``"auto"`` is the official 0.9, as in ``tabicl``.
    average_logits : bool, default=True
        Average members' logits (else their probabilities).
    use_hierarchical : bool, default=True
        Solve problems with more classes than the model's ``max_classes``
        with a tree of smaller problems; if False such data raises.
    batch_size : int or None, default=8
        With a v2 network, members encoded together in one forward pass
        (``None``: all members of a normalisation at once); it bounds memory,
        not results. A v1 network ignores it: it encodes members one after
        another and shares the work of members with the same column order.
    max_context : int or None, default=None
        Keep at most this many training rows (stratified subsample drawn
        with ``random_state``) as the in-context table.
    pca_components : int, None or "auto", default="auto"
        ``"auto"`` is 16 with skicml's shipped models (and files and random
        weights), and None (the paper's ensemble, as in ``tabicl``) with a
        published official checkpoint, which was trained at scale and is
        not helped by the second view. With an integer, every other group
        of members sees, instead of the raw columns, the
        table's leading ``pca_components`` principal components (categorical
        columns one-hot encoded, numeric ones standardised; all components
        when there are fewer columns). This second view is skicml's addition:
        the shipped small network reads a few decorrelated columns far better
        than many correlated ones, and averaging both views had a lower log
        loss than the raw columns alone on every benchmark table with more
        than twelve columns (see :ref:`performance`). ``None`` gives the
        paper's ensemble, where every member sees the raw columns.
    inference_precision : {"float32", "float64", "bfloat16"}, default="float32"
        Precision of the network at ``fit`` and ``predict``. A row's
        probabilities do not depend on the other rows predicted with it up to
        about 1e-6 in float32, and to machine precision in float64 (at about
        twice the cost). ``"bfloat16"`` is for large tables on CPUs with
        bfloat16 units (AMX or AVX512-BF16) and on GPUs: 1.7x faster than
        float32 at 10,000 training rows and 2.1x at 50,000 on such a CPU,
        probabilities within about 0.01 of float32's and the same benchmark
        scores (see :ref:`performance`); on CPUs without those units it is
        slower.
    cache : {"auto", True, False}, default="auto"
        Cache at ``fit`` the in-context keys and values of the training rows,
        so ``predict_proba`` only encodes the test rows. ``"auto"`` caches
        when that takes under 2 GB.
    finetune_epochs : int, default=0
        Fine-tune the network on the training table before the in-context
        ``fit`` (0: no fine-tuning, the pretrained network as it is). The
        official recipe (``tabicl``'s ``Finetuned*`` estimators): episodes
        drawn from the table, each a fresh context/query split of the rows
        (20% queries) preprocessed like the ensemble's members, the network's
        own training loss (cross-entropy over the members' shifted classes)
        on the queries, AdamW with warm-up and cosine decay, early stopping
        on held-out rows; the best weights are kept, the pretrained ones when
        no epoch beats them.
        Up to 10,000 rows an epoch is one optimiser step (the official
        default is 30 epochs). ``fit`` and ``predict`` then run as without
        it, with all the rows as the context. See :ref:`tabicl_finetuning`
        (with the benchmark against the frozen model).
    finetune_lr : float, default=1e-5
        Peak learning rate of the fine-tuning (the official default).
    finetune_validation_fraction : float, default=0.1
        Share of the rows held out (stratified) to score each epoch; they are
        never in an episode (and are context rows again at inference).
    finetune_patience : int or None, default=8
        Stop after this many epochs without an improvement of the held-out
        loss (by 1e-4); ``None`` runs every epoch. Either way the best
        weights are kept.
    pretrained : str, path-like or None, default="tabicl-small"
        A shipped model name (``skicml info`` lists them), the path of a
        checkpoint on this machine (a file in skicml's format or an official
        TabICL checkpoint, v1 (0.1.x) or v2 (2.x); the file's config says
        which network to build), or the name of a published official
        checkpoint, as ``tabicl`` names them:
        ``"tabicl-classifier-v2-20260212.ckpt"``,
        ``"tabicl-classifier-v1.1-20250506.ckpt"``,
        ``"tabicl-classifier-v1-20250208.ckpt"``. A published checkpoint is
        read from the Hugging Face cache, downloaded once into it when it is
        missing (never with ``HF_HUB_OFFLINE=1`` or
        ``skicml.set_config(allow_download=False)``; ``skicml download NAME``
        fetches it ahead of time; see :ref:`published_models`), and the
        defaults tuned for the small shipped models (``softmax_temperature``
        and ``pca_components`` at ``"auto"``) give way to the official ones,
        so that predictions equal ``tabicl``'s for the same ``random_state``
        and ``n_estimators``. ``None`` builds the paper's architecture with
        random weights seeded from ``random_state`` (for tests and as a
        baseline; it predicts at about chance). Hub names and URLs raise.
    model_path : str, path-like or None, default=None
        The official estimator's name for ``pretrained``; when given, it is
        the model used. Passing both with different values raises a
        ``ValueError``.
    device : str, default="auto"
    random_state : int, RandomState instance or None, default=None
        Seeds the ensemble (column orders, class shifts, noise of
        ``quantile_rtdl``), ``max_context`` subsampling and the random
        weights of ``pretrained=None``.
    n_jobs : int or None, default=None
        torch threads during ``fit`` and ``predict`` (``-1``: all cores);
        restored afterwards.
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.
        ``0`` is silent; ``1`` shows progress bars over the ensemble members
        while ``fit`` encodes the training table ("TabICL context") and fits
        the ``"auto"`` temperature ("TabICL calibration"), and while
        ``predict_proba`` (and so ``predict``) runs ("TabICL predict");
        ``2`` keeps them on screen.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when ``X`` has string column names.
    model_ : TabICLModel
    model_provenance_ : dict
        Where the network's weights come from (recipe, steps, seed, hash).
    ensemble_ : EnsembleGenerator
        Preprocessed training data and the members' configurations.
    n_estimators_ : int
        Members actually used (fewer when the data allows fewer distinct ones).
    official_checkpoint_ : bool
        Whether the network is a published official checkpoint, whose
        official defaults replace the ``"auto"`` ones.
    pca_components_ : int or None
        The principal components of the second view (None: no second view).
    softmax_temperature_ : float
        The temperature applied to the averaged logits: ``softmax_temperature``
        itself, or with ``"auto"`` 0.9 divided by the fitted sharpening factor
        (with ``average_logits=False`` the averaged probabilities are raised
        to the power ``0.9 / softmax_temperature_`` and renormalised).
    n_finetune_steps_ : int
        Optimiser steps of the fine-tuning (0 without it).
    finetune_history_ : dict or None
        ``None`` without fine-tuning, else ``"train_loss"`` and
        ``"valid_loss"`` (per epoch), ``"pretrained_valid_loss"``,
        ``"best_epoch"`` (0: the pretrained weights were kept) and
        ``"kept_valid_loss"`` (the held-out loss of the kept weights).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from skicml import TabICLClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = TabICLClassifier(n_estimators=4, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    """

    _parameter_constraints = {
        **_TabICLBase._parameter_constraints,
        # A list's entries are checked against NORM_METHODS when the ensemble is drawn.
        "norm_methods": [StrOptions(set(NORM_METHODS)), "array-like", None],
        "class_shift": ["boolean"],
        "softmax_temperature": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "average_logits": ["boolean"],
        "use_hierarchical": ["boolean"],
        "max_context": [Interval(Integral, 1, None, closed="left"), None],
        "pca_components": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left"), None],
        "inference_precision": [StrOptions(set(_PRECISIONS))],
        "cache": [StrOptions({"auto"}), "boolean"],
        **FINETUNE_CONSTRAINTS,
    }

    def __init__(self, n_estimators=32, norm_methods=None, feat_shuffle_method="latin", class_shift=True,
                 outlier_threshold=4.0, softmax_temperature="auto", average_logits=True, use_hierarchical=True,
                 batch_size=8, max_context=None, pca_components="auto", inference_precision="float32", cache="auto",
                 finetune_epochs=0, finetune_lr=1e-5, finetune_validation_fraction=0.1, finetune_patience=8,
                 pretrained=DEFAULT_MODEL, model_path=None, device="auto", random_state=None, n_jobs=None,
                 verbose="auto"):
        self.n_estimators = n_estimators
        self.norm_methods = norm_methods
        self.feat_shuffle_method = feat_shuffle_method
        self.class_shift = class_shift
        self.outlier_threshold = outlier_threshold
        self.softmax_temperature = softmax_temperature
        self.average_logits = average_logits
        self.use_hierarchical = use_hierarchical
        self.batch_size = batch_size
        self.max_context = max_context
        self.pca_components = pca_components
        self.inference_precision = inference_precision
        self.cache = cache
        self.finetune_epochs = finetune_epochs
        self.finetune_lr = finetune_lr
        self.finetune_validation_fraction = finetune_validation_fraction
        self.finetune_patience = finetune_patience
        self.pretrained = pretrained
        self.model_path = model_path
        self.device = device
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    # -- fit --------------------------------------------------------------------
    def _subsample(self, X, y, rng):
        n = len(y)
        if self.max_context is None or n <= self.max_context:
            return X, y
        classes, codes = np.unique(y, return_inverse=True)
        keep = []
        # Stratified: every class keeps its share, and at least one row.
        for c in range(len(classes)):
            rows = np.flatnonzero(codes == c)
            k = max(1, int(round(self.max_context * len(rows) / n)))
            keep.append(rng.choice(rows, size=min(k, len(rows)), replace=False))
        keep = np.sort(np.concatenate(keep))
        X = X.iloc[keep] if _is_dataframe(X) else X[keep]
        return X, y[keep]

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Preprocess and encode the training table.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Numeric, categorical, string or boolean columns; missing values
            allowed (infinite values are not).
        y : array-like of shape (n_samples,)
            Class labels of any type.

        Returns
        -------
        self : TabICLClassifier
        """
        if y is None:
            raise ValueError("TabICLClassifier requires y to be passed, but the target y is None.")
        X = self._validate_X(X, reset=True)
        y = column_or_1d(check_array(y, ensure_2d=False, dtype=None, ensure_all_finite=False), warn=True)
        if len(y) != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {len(y)} labels.")
        check_no_missing_labels(y)
        check_classification_targets(y)
        seed = self._ensemble_seed()
        X, y = self._subsample(X, y, np.random.RandomState(seed))

        self.label_encoder_ = LabelEncoder()
        y_encoded = self.label_encoder_.fit_transform(y)
        self.classes_ = self.label_encoder_.classes_
        n_classes = len(self.classes_)
        self.model_, self.model_provenance_ = self._load()
        self.model_ = self.model_.to(_PRECISIONS[self.inference_precision])
        # An official checkpoint brings the official defaults where ours were tuned for the shipped models.
        self.official_checkpoint_ = is_official_checkpoint(self.model_provenance_)
        self.pca_components_ = (self.pca_components if self.pca_components != "auto"
                                else None if self.official_checkpoint_ else SHIPPED_PCA_COMPONENTS)
        if self.model_.max_classes == 0:
            raise ValueError(
                f"pretrained={self._weights_source()!r} is a regression network (max_classes=0); "
                "use TabICLRegressor with it, or give TabICLClassifier a classification checkpoint."
            )
        if n_classes > self.model_.max_classes and not self.use_hierarchical:
            raise ValueError(
                f"y has {n_classes} classes but the model handles {self.model_.max_classes} natively; "
                "set use_hierarchical=True to classify them through a class tree."
            )
        with self._threads():
            self.encoder_ = TransformToNumerical().fit(X)
            X_num = self.encoder_.transform(X)
            self.ensemble_ = EnsembleGenerator(
                n_estimators=self.n_estimators, norm_methods=self.norm_methods,
                feat_shuffle_method=self.feat_shuffle_method, class_shift=self.class_shift,
                outlier_threshold=self.outlier_threshold, random_state=seed,
                pca_components=self.pca_components_, categorical_features=_categorical_columns(self.encoder_),
                # a v2 network's class shifts are drawn as tabicl 2.x draws them
                member_draw="v2" if isinstance(self.model_, TabICLv2Model) else "v1",
            ).fit(X_num, y_encoded)
            self.n_estimators_ = self.ensemble_.n_estimators_
            self.class_prior_ = np.bincount(y_encoded, minlength=n_classes) / len(y_encoded)
            # A single class, or no informative column: the prior is the answer.
            self._fallback_ = n_classes < 2 or self.ensemble_.n_features_out_ == 0
            self._finetune(X_num, y_encoded, n_classes, seed)
            self.softmax_temperature_ = self._model_temperature()
            if not self._fallback_:
                self._encode_context()
                if self.softmax_temperature == "auto" and not self.official_checkpoint_:
                    folds = _calibration_folds(X_num, y_encoded, seed)
                    self.softmax_temperature_ = self._model_temperature() / self._fit_sharpening(folds, y_encoded)
        return self

    def _model_temperature(self):
        """The temperature inside the network (class-tree nodes, averaged logits)."""
        return OFFICIAL_TEMPERATURE if isinstance(self.softmax_temperature, str) else float(self.softmax_temperature)

    def _encode_context(self):
        with torch.inference_mode():
            if isinstance(self.model_, TabICLv2Model):
                self.context_ = MemberContexts(self.model_, self.ensemble_, self.ensemble_.y_members_,
                                               cache=self.cache, batch_size=self.batch_size, verbose=self.verbose)
            else:
                self.context_ = EnsembleContext(self.model_, self.ensemble_, cache=self.cache, verbose=self.verbose)

    # -- predict ----------------------------------------------------------------
    def _member_output(self, model, logits, offset):
        """What members contribute to the average: logits or probabilities, offset undone."""
        tau = self._model_temperature()
        if not self.average_logits:
            if len(self.classes_) > model.max_classes:
                logits = torch.exp(logits / tau) - 1e-6  # back to the tree's probabilities
            else:
                logits = torch.softmax(logits / tau, dim=-1)
        return torch.roll(logits, shifts=-offset, dims=-1)

    def _log_proba(self, average):
        """Unnormalised log-probabilities from the members' average output."""
        if self.average_logits:
            return average / self._model_temperature()
        return np.log(np.clip(average, 1e-300, None))

    def _fit_sharpening(self, folds, y):
        """The factor ``s`` minimising the held-out log loss of ``softmax(s * log_proba)``."""
        from scipy.optimize import minimize_scalar
        from scipy.special import log_softmax

        held = np.flatnonzero(folds >= 0)
        if len(held) == 0:
            return 1.0
        model = self.model_
        device = self._device()
        splits = [(np.flatnonzero(folds == fold),
                   torch.from_numpy(np.flatnonzero((folds != fold) & (folds != -2))).to(device))
                  for fold in np.unique(folds[held])]
        total = np.zeros((len(held), len(self.classes_)))
        members = progress(self.ensemble_.configs_, verbose=self.verbose, desc="TabICL calibration", unit="member")
        with torch.inference_mode():
            for index, (_, _, offset) in enumerate(members):
                for query, context in splits:
                    logits = self.context_.held_out_logits(model, index, query, context, self._model_temperature())
                    total[np.searchsorted(held, query)] += (
                        self._member_output(model, logits, offset).double().cpu().numpy())
        log_proba = self._log_proba(total / self.n_estimators_)
        target = y[held]

        def objective(log_s):
            # The log loss plus a standard-normal prior on log s, which keeps
            # the factor near 1 when few rows are held out.
            z = log_softmax(np.exp(log_s) * log_proba, axis=1)
            return -z[np.arange(len(held)), target].mean() + 0.5 * log_s**2 / len(held)

        result = minimize_scalar(objective, bounds=(np.log(0.2), np.log(50.0)), method="bounded")
        return float(np.exp(result.x))

    def _predict_chunk(self, X_test, bar=None):
        model = self.model_.to(self._device())
        members = self.context_.member_logits(model, self.ensemble_, X_test, self._model_temperature())
        total = None
        for logits, (_, _, offset) in zip(members, self.ensemble_.configs_):
            out = self._member_output(model, logits, offset).double()
            total = out if total is None else total + out
            if bar is not None:
                bar.update()
        average = (total / self.n_estimators_).cpu().numpy()
        if self.average_logits:
            average = average / self.softmax_temperature_
        elif self.softmax_temperature_ != self._model_temperature():
            average = self._log_proba(average) * (self._model_temperature() / self.softmax_temperature_)
        else:
            return average / average.sum(axis=1, keepdims=True)
        average = np.exp(average - average.max(axis=1, keepdims=True))
        return average / average.sum(axis=1, keepdims=True)

    def predict_proba(self, X):
        """Class probabilities of the rows of ``X``.

        Each row's prediction depends only on the training table and that row,
        never on the other rows passed with it.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        if self._fallback_:
            return np.tile(self.class_prior_, (X.shape[0], 1))
        n = X.shape[0]
        # One step per member and chunk of rows: a member's pass is the unit of work.
        with self._threads(), torch.inference_mode(), progress(
                total=self.n_estimators_ * -(-n // ROW_CHUNK), verbose=self.verbose,
                desc="TabICL predict", unit="member") as bar:
            X_test = self.ensemble_.transform(_encode(self.encoder_, X))
            chunks = []
            for start in range(0, n, ROW_CHUNK):
                chunk = {m: v[start:start + ROW_CHUNK] for m, v in X_test.items()}
                chunks.append(self._predict_chunk(chunk, bar))
        return np.vstack(chunks)

    def predict(self, X):
        """Most probable class of each row."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.expected_failed_checks = {
            "check_sample_weight_equivalence_on_dense_data":
                "in-context learning has no sample weights to honour",
        }
        return tags


class TabICLEmbedder(TransformerMixin, _TabICLBase):
    """Label-free row representations of TabICL, for use in pipelines.

    ``fit`` preprocesses the table and summarises its columns; ``transform``
    returns for every row the network's row vector (the input of its
    in-context stage), averaged over ``n_estimators`` column orders so that
    the representation does not depend on the order of the columns.

    Parameters
    ----------
    n_estimators : int, default=4
        Column orders to average over.
    norm_method : str, default="power"
        One of ``"none"``, ``"power"``, ``"quantile"``, ``"quantile_rtdl"``, ``"robust"``.
    feat_shuffle_method : {"latin", "shift", "random", "none"}, default="latin"
    outlier_threshold : float, default=4.0
    batch_size : int or None, default=8
        Accepted for symmetry with :class:`TabICLClassifier`; no effect yet.
    pretrained : str, path-like or None, default="tabicl-small"
        A shipped model name, the path of a checkpoint on this machine or a
        published v1 checkpoint's name (``"tabicl-classifier-v1-20250208.ckpt"``,
        ``"tabicl-classifier-v1.1-20250506.ckpt"``), as in
        :class:`TabICLClassifier`; ``None`` gives random weights.
    model_path : str, path-like or None, default=None
        Alias of ``pretrained``, as in :class:`TabICLClassifier`.
    device : str, default="auto"
    random_state : int, RandomState instance or None, default=None
        Seeds the column orders and the random weights of ``pretrained=None``.
    n_jobs : int or None, default=None
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.

    Attributes
    ----------
    n_features_in_ : int
    model_ : TabICLModel
    n_components_ : int
        Width of the representation (``row_num_cls * embed_dim``).

    Examples
    --------
    >>> from sklearn.datasets import load_wine
    >>> from skicml.tabicl import TabICLEmbedder
    >>> X, _ = load_wine(return_X_y=True)
    >>> TabICLEmbedder(random_state=0).fit_transform(X).shape[0]
    178
    """

    _parameter_constraints = {
        **_TabICLBase._parameter_constraints,
        "norm_method": [StrOptions(set(NORM_METHODS))],
    }

    def __init__(self, n_estimators=4, norm_method="power", feat_shuffle_method="latin", outlier_threshold=4.0,
                 batch_size=8, pretrained=DEFAULT_MODEL, model_path=None, device="auto", random_state=None,
                 n_jobs=None, verbose="auto"):
        self.n_estimators = n_estimators
        self.norm_method = norm_method
        self.feat_shuffle_method = feat_shuffle_method
        self.outlier_threshold = outlier_threshold
        self.batch_size = batch_size
        self.pretrained = pretrained
        self.model_path = model_path
        self.device = device
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Preprocess ``X`` and summarise its columns (``y`` is ignored)."""
        X = self._validate_X(X, reset=True)
        with self._threads():
            self.encoder_ = TransformToNumerical().fit(X)
            X_num = self.encoder_.transform(X)
            self.ensemble_ = EnsembleGenerator(
                n_estimators=self.n_estimators, norm_methods=[self.norm_method],
                feat_shuffle_method=self.feat_shuffle_method, class_shift=False,
                outlier_threshold=self.outlier_threshold, random_state=self._ensemble_seed(),
            ).fit(X_num, np.zeros(X_num.shape[0], dtype=np.int64))
            self.model_, self.model_provenance_ = self._load()
            if isinstance(self.model_, TabICLv2Model):
                raise ValueError(
                    f"pretrained={self._weights_source()!r} is a TabICL v2 network, whose column stage reads "
                    "the labels: it has no label-free row representation. TabICLEmbedder needs a v1 "
                    "checkpoint (such as the default 'tabicl-small')."
                )
            # Representations are features: computed in float64 so that they do
            # not depend on how rows are batched.
            self.model_ = self.model_.double()
            self.n_components_ = self.model_.row_dim
            if self.ensemble_.n_features_out_ > 0:
                with torch.inference_mode():
                    self.context_ = EnsembleContext(self.model_, self.ensemble_, labels=False)
        return self

    def transform(self, X):
        """Row representations of shape ``(n_samples, n_components_)``, float64."""
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        if self.ensemble_.n_features_out_ == 0:
            return np.zeros((X.shape[0], self.n_components_))
        with self._threads(), torch.inference_mode():
            X_test = self.ensemble_.transform(_encode(self.encoder_, X))
            model = self.model_.to(self._device())
            out = []
            for start in range(0, X.shape[0], ROW_CHUNK):
                chunk = {m: v[start:start + ROW_CHUNK] for m, v in X_test.items()}
                out.append(self.context_.embed(model, self.ensemble_, chunk).cpu().numpy())
        return np.vstack(out)

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self)
        return np.asarray([f"tabiclembedder{i}" for i in range(self.n_components_)], dtype=object)
