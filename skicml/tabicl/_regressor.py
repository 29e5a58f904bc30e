"""TabICLRegressor: regression by in-context learning with TabICL v2's quantile head."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..base import progress, seeded
from ..utils.param_validation import Integral, Interval, StrOptions, fit_context
from ..utils.validation import check_regression_targets
from ._classifier import (FINETUNE_CONSTRAINTS, _PRECISIONS, _categorical_columns, _encode, _is_dataframe, _TabICLBase,
                          load_tabicl_model)
from ._encoding import TransformToNumerical
from ._ensemble import EnsembleGenerator
from ._inference import ROW_CHUNK, MemberContexts
from ._model_v2 import TabICLv2Model
from ._normalization import NORM_METHODS

__all__ = ["TabICLRegressor"]

#: The model ``TabICLRegressor()`` uses by default (``pretrained``).
DEFAULT_REGRESSION_MODEL = "tabicl-regressor-small"

#: What ``predict(X, output=...)`` returns.
OUTPUTS = ("mean", "median", "quantiles", "mean_std", "raw_quantiles")
#: Probability levels of ``output="quantiles"`` when ``alphas`` is not given (the official default).
DEFAULT_ALPHAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)

#: The architecture of ``pretrained=None``: the size of the shipped model, random weights.
RANDOM_REGRESSION_CONFIG = dict(max_classes=0, num_quantiles=999, embed_dim=32, col_num_blocks=1, col_nhead=4,
                                col_num_inds=16, row_num_blocks=1, row_nhead=4, row_num_cls=4, icl_num_blocks=3,
                                icl_nhead=4)


def _random_regression_network(seed):
    """A small v2 regression network with random weights (``pretrained=None``)."""
    with seeded(seed):
        model = TabICLv2Model(**RANDOM_REGRESSION_CONFIG)
    return model.eval(), {"weights": f"random (seed {seed})"}


class TabICLRegressor(RegressorMixin, _TabICLBase):
    """TabICL v2: regression by in-context learning, with a predictive distribution per row.

    ``fit`` standardises the target, preprocesses the training table once per
    ensemble member and encodes it through the network; ``predict`` runs new
    rows against it in one forward pass, with no gradient step. The network
    predicts ``num_quantiles`` quantiles of each row's target (TabICL v2's
    quantile head), so besides the mean it gives the median, any quantile and
    a spread: the reason to use this model rather than a point regressor.
    By default the regression model shipped with skicml is used (``skicml
    info`` shows its provenance); ``pretrained`` (or its alias ``model_path``)
    takes a checkpoint on disk, such as an official TabICL v2 regressor file.

    Parameters
    ----------
    n_estimators : int, default=8
        Ensemble members; each sees the columns in another order and one of
        ``norm_methods``. Their predictions are averaged on the target's
        scale, statistic by statistic (as the official estimator does).
    norm_methods : str, list of str or None, default=None
        Normalisations to ensemble over, among ``"none"``, ``"power"``,
        ``"quantile"``, ``"quantile_rtdl"``, ``"robust"``; ``None`` means
        ``["none", "power"]``.
    feat_shuffle_method : {"latin", "shift", "random", "none"}, default="latin"
        How members reorder the columns (the network is not invariant to it).
    outlier_threshold : float, default=4.0
        z-score beyond which feature values are softly clipped.
    batch_size : int or None, default=8
        Members encoded together in one forward pass; ``None`` is all of a
        normalisation's members at once. Bounds memory, not results.
    max_context : int or None, default=None
        Keep at most this many training rows (a random subsample drawn with
        ``random_state``) as the in-context table.
    pca_components : int or None, default=None
        With a number, every other group of members sees the table's leading
        principal components instead of the raw columns, as in
        :class:`TabICLClassifier`; ``None`` gives the official ensemble.
    inference_precision : {"float32", "float64", "bfloat16"}, default="float32"
        Precision of the network at ``fit`` and ``predict``.
    cache : {"auto", True, False}, default="auto"
        Cache at ``fit`` what the training rows contribute to every layer
        (the official ``kv_cache``), so that ``predict`` only runs the new
        rows. ``"auto"`` caches when that takes under 2 GB; without it every
        ``predict`` runs the training rows again.
    finetune_epochs : int, default=0
        Fine-tune the network on the training table before the in-context
        ``fit`` (0: no fine-tuning, the pretrained network as it is). The
        official recipe (``tabicl``'s ``Finetuned*`` estimators): episodes
        drawn from the table, each a fresh context/query split of the rows
        (20% queries) preprocessed like the ensemble's members, the network's
        own training loss (the pinball loss over its quantile levels, targets
        standardised by the context) on the queries, AdamW with warm-up and
        cosine decay, early stopping on held-out rows; the best weights are
        kept, the pretrained ones when no epoch beats them.
        Up to 10,000 rows an epoch is one optimiser step (the official
        default is 30 epochs). ``fit`` and ``predict`` then run as without
        it, with all the rows as the context. See :ref:`tabicl_finetuning`
        (with the benchmark against the frozen model).
    finetune_lr : float, default=1e-5
        Peak learning rate of the fine-tuning (the official default).
    finetune_validation_fraction : float, default=0.1
        Share of the rows held out to score each epoch; they are
        never in an episode (and are context rows again at inference).
    finetune_patience : int or None, default=8
        Stop after this many epochs without an improvement of the held-out
        loss (by 1e-4); ``None`` runs every epoch. Either way the best
        weights are kept.
    pretrained : str, path-like or None, default="tabicl-regressor-small"
        A shipped model name (``skicml info`` lists them), the path of a
        regression checkpoint on this machine (skicml's format or an official
        TabICL v2 regressor file), or ``"tabicl-regressor-v2-20260212.ckpt"``,
        the published official regressor, as ``tabicl`` names it: read from
        the Hugging Face cache, downloaded once into it when missing (never
        with ``HF_HUB_OFFLINE=1`` or ``skicml.set_config(allow_download=False)``;
        ``skicml download NAME`` fetches it ahead of time; see
        :ref:`published_models`). The defaults are the official estimator's,
        so predictions equal ``tabicl``'s for the same ``random_state``.
        ``None`` builds a small v2 regression network with random weights
        seeded from ``random_state`` (for tests; it predicts about the
        training mean). Hub names and URLs raise.
    model_path : str, path-like or None, default=None
        The official estimator's name for ``pretrained``; passing both with
        different values raises a ``ValueError``.
    device : str, default="auto"
    random_state : int, RandomState instance or None, default=None
        Seeds the ensemble (column orders, noise of ``quantile_rtdl``),
        ``max_context`` subsampling and the random weights of
        ``pretrained=None``.
    n_jobs : int or None, default=None
        torch threads during ``fit`` and ``predict`` (``-1``: all cores);
        restored afterwards.
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.
        ``1`` shows progress bars while ``fit`` encodes the training table and
        while ``predict`` runs; ``2`` keeps them on screen.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when ``X`` has string column names.
    model_ : TabICLv2Model
    model_provenance_ : dict
        Where the network's weights come from (recipe, steps, seed, hash).
    ensemble_ : EnsembleGenerator
        Preprocessed training data and the members' configurations.
    n_estimators_ : int
        Members actually used (fewer when the data allows fewer distinct ones).
    y_mean_, y_scale_ : float
        The standardisation of the target the network sees.
    n_finetune_steps_ : int
        Optimiser steps of the fine-tuning (0 without it).
    finetune_history_ : dict or None
        ``None`` without fine-tuning, else ``"train_loss"`` and
        ``"valid_loss"`` (per epoch), ``"pretrained_valid_loss"``,
        ``"best_epoch"`` (0: the pretrained weights were kept) and
        ``"kept_valid_loss"`` (the held-out loss of the kept weights).

    See Also
    --------
    TabICLClassifier : the classifier, with v1 or v2 weights.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from skicml import TabICLRegressor
    >>> X, y = load_diabetes(return_X_y=True)
    >>> reg = TabICLRegressor(n_estimators=2, random_state=0).fit(X[:200], y[:200])
    >>> reg.predict(X[200:203]).shape
    (3,)
    >>> low, high = reg.predict(X[200:203], output="quantiles", alphas=[0.1, 0.9]).T
    >>> bool((low <= high).all())
    True
    """

    _parameter_constraints = {
        **_TabICLBase._parameter_constraints,
        "norm_methods": [StrOptions(set(NORM_METHODS)), "array-like", None],
        "max_context": [Interval(Integral, 1, None, closed="left"), None],
        "pca_components": [Interval(Integral, 1, None, closed="left"), None],
        "inference_precision": [StrOptions(set(_PRECISIONS))],
        "cache": [StrOptions({"auto"}), "boolean"],
        **FINETUNE_CONSTRAINTS,
    }

    def __init__(self, n_estimators=8, norm_methods=None, feat_shuffle_method="latin", outlier_threshold=4.0,
                 batch_size=8, max_context=None, pca_components=None, inference_precision="float32", cache="auto",
                 finetune_epochs=0, finetune_lr=1e-5, finetune_validation_fraction=0.1, finetune_patience=8,
                 pretrained=DEFAULT_REGRESSION_MODEL, model_path=None, device="auto", random_state=None,
                 n_jobs=None, verbose="auto"):
        self.n_estimators = n_estimators
        self.norm_methods = norm_methods
        self.feat_shuffle_method = feat_shuffle_method
        self.outlier_threshold = outlier_threshold
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

    _default_model = DEFAULT_REGRESSION_MODEL
    _random_network = staticmethod(_random_regression_network)

    # -- fit --------------------------------------------------------------------
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Standardise the target, preprocess and encode the training table.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Numeric, categorical, string or boolean columns; missing values
            allowed (infinite values are not).
        y : array-like of shape (n_samples,)
            Real targets: finite, not all equal.

        Returns
        -------
        self : TabICLRegressor
        """
        if y is None:
            raise ValueError("TabICLRegressor requires y to be passed, but the target y is None.")
        X = self._validate_X(X, reset=True)
        y = check_regression_targets(y, X.shape[0])
        if len(y) < 2:
            raise ValueError(f"TabICLRegressor needs at least 2 samples to learn in context, got n_samples = {len(y)}.")
        if np.ptp(y) == 0:
            raise ValueError(
                f"y is constant (every target is {y[0]!r}): there is nothing to regress; the prediction is "
                "that constant."
            )
        seed = self._ensemble_seed()
        rng = np.random.RandomState(seed)
        if self.max_context is not None and len(y) > self.max_context:
            keep = np.sort(rng.choice(len(y), size=self.max_context, replace=False))
            X = X.iloc[keep] if _is_dataframe(X) else X[keep]
            y = y[keep]

        y_scaled = self._standardise(y)
        self.model_, self.model_provenance_ = self._load()
        if getattr(self.model_, "max_classes", None) != 0:
            raise ValueError(
                f"pretrained={self._weights_source()!r} is a classification network; TabICLRegressor needs a "
                "regression checkpoint (a TabICL v2 network with max_classes=0, such as "
                f"{DEFAULT_REGRESSION_MODEL!r})."
            )
        self.model_ = self.model_.to(_PRECISIONS[self.inference_precision])
        with self._threads():
            self.encoder_ = TransformToNumerical().fit(X)
            X_num = self.encoder_.transform(X)
            self.ensemble_ = EnsembleGenerator(
                n_estimators=self.n_estimators, norm_methods=self.norm_methods,
                feat_shuffle_method=self.feat_shuffle_method, class_shift=False,
                outlier_threshold=self.outlier_threshold, random_state=seed,
                pca_components=self.pca_components, categorical_features=_categorical_columns(self.encoder_),
            ).fit(X_num, np.zeros(len(y), dtype=np.int64))
            self.n_estimators_ = self.ensemble_.n_estimators_
            self._y_train = y_scaled
            # No informative column: the target's distribution is the answer.
            self._fallback_ = self.ensemble_.n_features_out_ == 0
            self._finetune(X_num, y_scaled, 0, seed)
            if not self._fallback_:
                with torch.inference_mode():
                    self.context_ = MemberContexts(self.model_, self.ensemble_, y_scaled[None], cache=self.cache,
                                                    batch_size=self.batch_size, verbose=self.verbose)
            else:
                self._y_sorted = np.sort(y)
        return self

    def _standardise(self, y):
        """Set ``y_mean_`` and ``y_scale_`` and return the standardised target (float32).

        The target is first divided by its largest magnitude, so that its
        mean and spread are computed on numbers near 1: squaring targets of
        1e-300 gives 0 and squaring 1e200 gives inf, either of which turned
        every prediction into NaN or inf. Predictions go back through the
        same unit (:meth:`_unstandardise`).
        """
        unit = float(np.max(np.abs(y)))
        unit_y = y / unit
        mean, scale = float(unit_y.mean()), float(unit_y.std())
        if not (np.isfinite(mean) and np.isfinite(scale) and scale > 0):
            raise ValueError(
                f"y cannot be standardised (its values span [{y.min()!r}, {y.max()!r}], a spread below the "
                "precision of float64); rescale it."
            )
        self._y_unit, self._y_standard = unit, (mean, scale)
        self.y_mean_, self.y_scale_ = mean * unit, scale * unit
        return ((unit_y - mean) / scale).astype(np.float32)

    def _unstandardise(self, value):
        """Standardised network outputs back on the target's scale (through the target's unit)."""
        unit = getattr(self, "_y_unit", None)
        if unit is None:  # fitted before the unit existed
            return value * self.y_scale_ + self.y_mean_
        mean, scale = self._y_standard
        return (value * scale + mean) * unit

    def _unstandardise_spread(self, spread):
        """A spread (standard deviation) of standardised outputs on the target's scale."""
        unit = getattr(self, "_y_unit", None)
        return spread * self.y_scale_ if unit is None else spread * self._y_standard[1] * unit

    # -- predict ----------------------------------------------------------------
    def predict(self, X, output="mean", alphas=None):
        """Predicted targets of the rows of ``X``, or their predictive distribution.

        Each row's prediction depends only on the training table and that row,
        never on the other rows passed with it.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        output : {"mean", "median", "quantiles", "mean_std", "raw_quantiles"} or list, default="mean"
            - ``"mean"``: the mean of the predicted distribution, shape (n_samples,);
            - ``"median"``: its median, shape (n_samples,);
            - ``"quantiles"``: its quantiles at ``alphas``, shape (n_samples, len(alphas));
            - ``"mean_std"``: a tuple ``(mean, std)``, each of shape (n_samples,);
              the standard deviation is that of the ensemble's averaged quantiles;
            - ``"raw_quantiles"``: the network's ``num_quantiles`` quantiles
              averaged over the members, shape (n_samples, num_quantiles);
            - a list of these: a dict from each name to its value.
        alphas : array-like of float in (0, 1) or None, default=None
            Levels of ``output="quantiles"``; ``None`` means 0.1, 0.2, ..., 0.9.

        Returns
        -------
        ndarray, tuple or dict
            As described for ``output``, on the scale of the training target.
        """
        check_is_fitted(self)
        names = [output] if isinstance(output, str) else list(output)
        unknown = [name for name in names if name not in OUTPUTS]
        if unknown or not names:
            raise ValueError(f"output must be one of {OUTPUTS} or a list of them, got {output!r}.")
        alphas = np.asarray(DEFAULT_ALPHAS if alphas is None else alphas, dtype=np.float64).reshape(-1)
        if alphas.size == 0 or not np.all((alphas > 0) & (alphas < 1)):
            raise ValueError(f"alphas must be probability levels strictly between 0 and 1, got {alphas.tolist()}.")
        X = self._validate_X(X, reset=False)
        if self._fallback_:
            stats = _empirical_stats(self._y_sorted, X.shape[0], names, alphas, self.model_,
                                     getattr(self, "_y_unit", 1.0))
        else:
            stats = self._predict_stats(X, names, alphas)
        results = {name: stats[name] for name in names}
        return results[output] if isinstance(output, str) else results

    def _predict_stats(self, X, names, alphas):
        n = X.shape[0]
        model = self.model_.to(self._device())
        parts = {name: [] for name in names}
        with self._threads(), torch.inference_mode(), progress(
                total=self.n_estimators_ * -(-n // ROW_CHUNK), verbose=self.verbose,
                desc="TabICL predict", unit="member") as bar:
            X_test = self.ensemble_.transform(_encode(self.encoder_, X))
            for start in range(0, n, ROW_CHUNK):
                chunk = {view: rows[start:start + ROW_CHUNK] for view, rows in X_test.items()}
                if names == ["mean"]:  # the quantiles' mean needs none of them: the network gives it alone
                    means = self.context_.member_outputs(model, self.ensemble_, chunk, bar, quantile_mean=True)
                    parts["mean"].append(self._unstandardise(means.double()).mean(0).cpu().numpy())
                    continue
                raw = self.context_.member_outputs(model, self.ensemble_, chunk, bar)  # (members, m, Q)
                for name, value in self._statistics(model, raw, names, alphas).items():
                    parts[name].append(value)
        out = {}
        for name, values in parts.items():
            if name == "mean_std":
                out[name] = tuple(np.concatenate([v[i] for v in values]) for i in range(2))
            else:
                out[name] = np.concatenate(values)
        return out

    def _statistics(self, model, raw, names, alphas):
        """Statistics of members' raw standardised quantiles, each averaged over members on the target's scale."""
        dist = model.distribution(raw.double())

        def averaged(value):
            return self._unstandardise(value).mean(0)

        out = {}
        for name in names:
            if name == "mean":
                out[name] = averaged(dist.mean()).cpu().numpy()
            elif name == "median":
                out[name] = averaged(dist.median()).cpu().numpy()
            elif name == "quantiles":
                out[name] = averaged(dist.icdf(torch.as_tensor(alphas, dtype=torch.float64))).cpu().numpy()
            elif name == "raw_quantiles":
                out[name] = averaged(dist.quantiles).cpu().numpy()
            else:  # mean_std: the spread of the members' averaged quantile function
                # Taken in standardised units, then scaled: squares of targets of 1e-300 underflow.
                spread = dist.quantiles.mean(0).std(dim=-1, unbiased=False)
                out[name] = (averaged(dist.mean()).cpu().numpy(), self._unstandardise_spread(spread).cpu().numpy())
        return out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Random weights (pretrained=None) predict about the training mean.
        tags.regressor_tags.poor_score = self.pretrained is None and self.model_path is None
        tags.expected_failed_checks = {
            "check_sample_weight_equivalence_on_dense_data":
                "in-context learning has no sample weights to honour",
        }
        return tags


def _empirical_stats(y_sorted, n, names, alphas, model, unit=1.0):
    """The statistics of the training targets themselves, for every row (no informative column).

    The mean and spread are computed in units of ``unit`` (the target's
    largest magnitude), so that neither underflows nor overflows.
    """
    unit_y = y_sorted / unit
    mean = np.full(n, unit_y.mean() * unit)
    out = {"mean": mean, "median": np.full(n, np.median(y_sorted)),
           "quantiles": np.tile(np.quantile(y_sorted, alphas), (n, 1)),
           "mean_std": (mean, np.full(n, unit_y.std() * unit))}
    num_quantiles = getattr(model, "num_quantiles", 999)
    levels = (np.arange(num_quantiles) + 0.5) / num_quantiles
    out["raw_quantiles"] = np.tile(np.quantile(y_sorted, levels), (n, 1))
    return {name: out[name] for name in names}
