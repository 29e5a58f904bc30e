"""``WearableEncoder``: the scikit-learn face of the wearable behavior model."""


import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._weights import load_module, save_module
from ..base import TorchEstimatorMixin, progress, seeded, warn_user
from ..utils.param_validation import Integral, Interval, Real, StrOptions, fit_context, shared_constraints
from ._model import POOLINGS, WearableModel
from ._validation import validate_weeks

__all__ = ["WearableEncoder"]

# Constructor arguments that define the network, stored in checkpoints.
_ARCHITECTURE = (
    "backbone", "bidirectional", "d_model", "n_layers", "d_state", "head_dim", "expand",
    "chunk_size", "n_heads", "tokenizer_hidden", "proj_dim", "dropout", "pooling",
    "temperature", "koleo_weight", "augment", "objective", "mask_fraction", "visible_weight",
    "day_context",
)


class WearableEncoder(ClassNamePrefixFeaturesOutMixin, TorchEstimatorMixin, TransformerMixin, BaseEstimator):
    """Self-supervised encoder of behavioral wearable weeks (Erturk et al., ICML 2025).

    Each sample is one participant-week: ``T`` hours (168) by ``V`` behavioral
    variables (steps, energy, heart rate, HRV, sleep, ...) with NaN where
    nothing was recorded. Every hour becomes one token built from its values
    and missingness bits; a bidirectional Mamba-2 (or a Transformer) mixes
    the week, and the mean over hours is the week embedding. ``fit``
    pretrains the network self-supervised: contrastively as in the paper
    (two augmented views of a week, or two weeks of one person, must find
    each other among the batch), or by masked reconstruction of hidden
    hours. The embeddings then feed a linear probe for health labels.

    Parameters
    ----------
    n_channels : int or None, default=None
        Variables per hour ``V``, needed to unflatten 2-D input (one week
        per row, C-order ``(T, V)``). ``None`` reads 2-D rows as a single
        variable over ``n_features`` time steps. 3-D input carries ``V``
        itself.
    backbone : {"mamba2", "transformer"}, default="mamba2"
    bidirectional : bool, default=True
        Read each week forward and backward in time; ``False`` is causal.
    d_model : int, default=64
        Width of the tokens and of the embedding.
    n_layers : int, default=2
    d_state : int, default=16
        Mamba-2 state size per channel.
    head_dim : int, default=16
        Mamba-2 channels per head.
    expand : int, default=2
        Mamba-2 inner width factor.
    chunk_size : int, default=16
        Chunk length of the Mamba-2 scan; a speed knob only (16 is fastest
        on CPU at the default sizes).
    n_heads : int, default=4
        Attention heads of the Transformer backbone.
    tokenizer_hidden : int, default=64
        Hidden width of the hourly tokenizer MLP.
    proj_dim : int, default=32
        Output width of the projection head used by the contrastive loss.
    dropout : float, default=0.0
        Dropout in the tokenizer, the layers and the projection head. The
        re-implementation of the paper used 0.22 at width 256; at the CPU
        sizes here dropout slowed contrastive pretraining down without
        helping the probes, so it is off by default.
    pooling : {"mean", "masked_mean", "layer_mean"}, default="mean"
        How the hourly tokens become the week embedding. ``"mean"`` is the
        paper's mean over hours of the last layer's tokens;
        ``"masked_mean"`` averages only the hours with an observation;
        ``"layer_mean"`` puts the means over hours of the tokenizer's output
        and of every backbone layer's output side by side
        (``(n_layers + 1) * d_model`` values). The last layer mixes the
        hours; the earlier ones still hold each hour's own readings and,
        with ``day_context``, its night-to-night differences. A
        ``pretrained`` encoder keeps the pooling it was saved with.
    objective : {"infonce", "masked"}, default="infonce"
        The pretraining loss. ``"infonce"`` is the paper's contrastive
        objective (``proj_dim``, ``temperature``, ``koleo_weight``,
        ``positive_pairs`` and ``augment`` apply to it). ``"masked"`` hides
        ``mask_fraction`` of the hours and two 6-24 h blocks from the
        tokenizer and regresses their observed z-scores from the backbone's
        tokens, each variable weighted equally. On the synthetic cohort it
        keeps more of the health signal than the contrastive loss (see the
        wearable benchmarks in the documentation); the shipped encoder is
        trained with it.
    mask_fraction : float, default=0.3
        Share of hours hidden at random by ``objective="masked"``.
    visible_weight : float, default=0.0
        With ``objective="masked"``, the weight of also reconstructing the
        hours the network was shown, relative to the hidden ones. The week
        embedding is the mean of the hourly tokens, so tokens that must give
        back their own readings carry every variable's weekly level into it;
        ``0`` is plain masked prediction.
    day_context : bool, default=False
        Each hour's token also reads the same hour one day before and one
        day after, through a second tokenizer MLP added to the one-hour one
        (an extension beyond the paper's tokenizer). Night-to-night
        differences (an irregular sleep onset) then live in single tokens
        and survive mean pooling; see the wearable benchmarks in the
        documentation for what it does to each label.
    temperature : float, default=0.1
        InfoNCE temperature.
    koleo_weight : float, default=0.0
        Weight of the KoLeo spreading regulariser.
    positive_pairs : {"augment", "participant"}, default="augment"
        ``"augment"`` contrasts two augmented views of the same week;
        ``"participant"`` contrasts a week with another week of the same
        person (needs ``groups`` in ``fit``), drawn once per fit.
    augment : dict or None, default=None
        Overrides of the augmentation strengths (``cutout_blocks``,
        ``cutout_hours``, ``channel_dropout``, ``jitter``, ``scale``).
    max_epochs : int, default=20
        ``0`` keeps the randomly initialised network (with the
        normalisation statistics of ``X``): the control that measures what
        pretraining adds.
    batch_size : int, default=128
    lr : float, default=1e-3
    weight_decay : float, default=1e-4
    validation_fraction : float or None, default=None
        Share of weeks held out to monitor the contrastive loss.
    n_iter_no_change : int or None, default=None
        Early stopping patience on the held-out loss.
    checkpoint_dir : str or None, default=None
        Save a resumable checkpoint here after every epoch.
    pretrained : str or None, default=None
        Name of a shipped encoder (see ``skicml info``) or path of a file
        written by :meth:`save`. The network, its normalisation statistics
        and its weights come from the file and ``fit`` only validates ``X``
        (which must have the checkpoint's number of variables).
    dtype : {"float32", "float64"}, default="float32"
        Precision of the network.
    device : str, default="auto"
    random_state : int, RandomState instance or None, default=None
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.
        ``0`` is silent; ``1`` shows progress bars over the epochs of ``fit``
        and over the weeks of ``transform`` (``2`` keeps them on screen).

    Attributes
    ----------
    module_ : WearableModel
        The network in eval mode.
    channel_mean_, channel_std_ : ndarray of shape (n_channels,)
        Per-variable statistics of the observed training cells (mean 0 and
        std 1 for a variable never observed; std floored at 1e-6).
    n_channels_ : int
    n_timesteps_ : int
    n_features_in_ : int
        Width of the flattened weeks, ``n_timesteps_ * n_channels_``.
    embedding_dim_ : int
        Width of the embeddings: ``d_model``, or ``(n_layers + 1) * d_model``
        with ``pooling="layer_mean"``.
    config_ : dict
        The network's architecture (from the constructor or the checkpoint).
    history_ : list of float
        Training loss per epoch (empty for a pretrained encoder).
    provenance_ : dict
        Where the weights come from (for a pretrained encoder).

    See Also
    --------
    skicml.wearable.WeeklySummaryFeatures : The summary-statistics baseline.
    skicml.wearable.evaluate_probes : Linear probes with person-level splits.

    Notes
    -----
    ``fit`` builds the network from the class attribute ``module_class``
    (:class:`~skicml.wearable.WearableModel`), as
    ``module_class(n_channels, n_timesteps, **config)`` with ``config`` the
    architecture arguments above. To train a variant of the network (another
    loss in ``forward``, a frozen part), subclass the encoder and set
    ``module_class`` to a subclass of ``WearableModel``: ``fit`` then trains
    and keeps that network as ``module_``, and the subclass takes the same
    constructor arguments, so it stays a scikit-learn estimator.

    Examples
    --------
    >>> from skicml.datasets import make_wearable_cohort
    >>> from skicml.wearable import WearableEncoder
    >>> X, meta, y_static, y_weekly = make_wearable_cohort(n_people=8, n_weeks=2, random_state=0)
    >>> encoder = WearableEncoder(d_model=16, n_layers=1, max_epochs=1, random_state=0)
    >>> encoder.fit_transform(X).shape
    (16, 16)
    """

    #: The network ``fit`` builds and trains; a subclass may set its own (see Notes).
    module_class = WearableModel

    _parameter_constraints = {
        "n_channels": [Interval(Integral, 1, None, closed="left"), None],
        "backbone": [StrOptions({"mamba2", "transformer"})],
        "bidirectional": ["boolean"],
        **{name: [Interval(Integral, 1, None, closed="left")]
           for name in ("d_model", "n_layers", "d_state", "head_dim", "expand", "chunk_size", "n_heads",
                        "tokenizer_hidden", "proj_dim")},
        "dropout": [Interval(Real, 0, 1, closed="both")],
        "pooling": [StrOptions(set(POOLINGS))],
        "objective": [StrOptions({"infonce", "masked"})],
        "mask_fraction": [Interval(Real, 0, 1, closed="left")],
        "visible_weight": [Interval(Real, 0, None, closed="left")],
        "day_context": ["boolean"],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "koleo_weight": [Interval(Real, 0, None, closed="left")],
        "positive_pairs": [StrOptions({"augment", "participant"})],
        "augment": [dict, None],
        "dtype": [StrOptions({"float32", "float64"})],
        **shared_constraints("max_epochs", "batch_size", "lr", "weight_decay", "validation_fraction",
                             "n_iter_no_change", "checkpoint_dir", "pretrained", "device", "random_state",
                             "verbose"),
    }

    def __init__(self, n_channels=None, backbone="mamba2", bidirectional=True, d_model=64, n_layers=2,
                 d_state=16, head_dim=16, expand=2, chunk_size=16, n_heads=4, tokenizer_hidden=64,
                 proj_dim=32, dropout=0.0, pooling="mean", objective="infonce", mask_fraction=0.3,
                 visible_weight=0.0, day_context=False, temperature=0.1, koleo_weight=0.0,
                 positive_pairs="augment", augment=None, max_epochs=20, batch_size=128, lr=1e-3,
                 weight_decay=1e-4, validation_fraction=None, n_iter_no_change=None,
                 checkpoint_dir=None, pretrained=None, dtype="float32", device="auto",
                 random_state=None, verbose="auto"):
        self.n_channels = n_channels
        self.backbone = backbone
        self.bidirectional = bidirectional
        self.d_model = d_model
        self.n_layers = n_layers
        self.d_state = d_state
        self.head_dim = head_dim
        self.expand = expand
        self.chunk_size = chunk_size
        self.n_heads = n_heads
        self.tokenizer_hidden = tokenizer_hidden
        self.proj_dim = proj_dim
        self.dropout = dropout
        self.pooling = pooling
        self.objective = objective
        self.mask_fraction = mask_fraction
        self.visible_weight = visible_weight
        self.day_context = day_context
        self.temperature = temperature
        self.koleo_weight = koleo_weight
        self.positive_pairs = positive_pairs
        self.augment = augment
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.checkpoint_dir = checkpoint_dir
        self.pretrained = pretrained
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, groups=None):
        """Pretrain the encoder on weeks ``X`` (or load ``pretrained``).

        Parameters
        ----------
        X : array-like of shape (n_weeks, T, V) or (n_weeks, T * V)
            Weeks with NaN for missing values.
        y : None
            Ignored.
        groups : array-like of shape (n_weeks,) or None
            Participant of each week, for ``positive_pairs="participant"``.

        Returns
        -------
        self
        """
        if self.objective == "masked" and self.positive_pairs == "participant":
            raise ValueError(
                "positive_pairs='participant' pairs weeks for the contrastive objective; "
                "objective='masked' reconstructs each week on its own. Use objective='infonce'."
            )
        weeks = validate_weeks(self, X, reset=True)
        observed = ~np.isnan(weeks)
        if not observed.any():
            raise ValueError(
                f"{type(self).__name__}: every value of X is missing (NaN); there is nothing to learn from."
            )
        self.n_timesteps_, self.n_channels_ = weeks.shape[1], weeks.shape[2]
        if self.pretrained is not None:
            return self._load_pretrained()

        counts = observed.sum(axis=(0, 1))
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(counts > 0, np.nansum(weeks, axis=(0, 1)) / np.maximum(counts, 1), 0.0)
            std = np.sqrt(np.nansum((weeks - mean) ** 2, axis=(0, 1)) / np.maximum(counts, 1))
        std = np.where(counts > 0, np.maximum(std, 1e-6), 1.0)
        zeros = np.nansum(weeks == 0, axis=(0, 1)) / np.maximum(counts, 1)
        # Activity-like channels (non-negative, often exactly zero) get the
        # multiplicative augmentation; heart rate or temperature do not.
        scalable = (counts > 0) & (np.nanmin(np.where(observed, weeks, 0), axis=(0, 1)) >= 0) & (zeros >= 0.1)

        config = self._architecture()
        self.config_ = dict(config)
        seed = self._seed()
        with seeded(seed):
            module = self.module_class(self.n_channels_, self.n_timesteps_, **config)
        module.channel_mean.copy_(torch.as_tensor(mean))
        module.channel_std.copy_(torch.as_tensor(std))
        module.scalable_channels.copy_(torch.as_tensor(scalable))
        module = module.to(getattr(torch, self.dtype))

        if self.max_epochs == 0:
            # The randomly initialised network: the control that shows what
            # pretraining adds.
            self.module_ = module.eval()
            self.history_, self.n_iter_ = [], 0
            self.provenance_ = {"trained_by": "fit", "n_weeks": len(weeks), "epochs": 0, "train_minutes": 0.0}
            self._set_statistics()
            return self
        inputs = {"weeks": torch.as_tensor(weeks, dtype=getattr(torch, self.dtype))}
        if self.positive_pairs == "participant":
            partner = self._partner_index(groups, len(weeks), seed)
            if partner is not None:
                inputs["partner"] = inputs["weeks"][partner]
        self.module_, history = self._fit_module(
            module, inputs, loss=None, warmup_fraction=0.05, grad_clip=1.0, seed=seed
        )
        self.history_ = list(history.train_loss)
        self.n_iter_ = history.n_epochs
        self.provenance_ = {"trained_by": "fit", "n_weeks": len(weeks), "epochs": history.n_epochs,
                            "train_minutes": round(sum(history.epoch_seconds) / 60, 1)}
        self._set_statistics()
        return self

    def _architecture(self):
        return {name: getattr(self, name) for name in _ARCHITECTURE}

    def _partner_index(self, groups, n_weeks, seed):
        if groups is None:
            warn_user(
                "positive_pairs='participant' needs groups (the participant of each week) in fit; "
                "falling back to two augmented views of each week.",
                UserWarning,
            )
            return None
        groups = np.asarray(groups)
        if groups.shape != (n_weeks,):
            raise ValueError(f"groups must have shape ({n_weeks},), one participant per week; got {groups.shape}.")
        rng = np.random.default_rng(seed)
        partner = np.arange(n_weeks)
        for members in _group_members(groups):
            if len(members) > 1:
                # Another week of the same person: a random derangement.
                cycle = rng.permutation(members)
                partner[cycle] = cycle[(np.arange(len(cycle)) + rng.integers(1, len(cycle))) % len(cycle)]
        return partner

    def _load_pretrained(self):
        def build(config):
            n_channels, n_timesteps = config.pop("n_channels"), config.pop("n_timesteps")
            if n_channels != self.n_channels_:
                raise ValueError(
                    f"The pretrained encoder {self.pretrained!r} reads weeks of {n_channels} variables "
                    f"({', '.join(config.get('channel_names', [])) or 'see its provenance'}); X has "
                    f"{self.n_channels_}."
                )
            if n_timesteps != self.n_timesteps_:
                raise ValueError(
                    f"The pretrained encoder {self.pretrained!r} reads weeks of {n_timesteps} hours; "
                    f"X has {self.n_timesteps_} hours per week. Pass weeks of {n_timesteps} hours "
                    f"(shape (n_weeks, {n_timesteps}, n_variables))."
                )
            config.pop("channel_names", None)  # provenance for users, not an argument of the network
            return self.module_class(n_channels, n_timesteps, **config)

        module, config, self.provenance_ = load_module(self.pretrained, build)
        self.config_ = {k: v for k, v in config.items() if k not in ("n_channels", "n_timesteps")}
        self.module_ = module.to(getattr(torch, self.dtype)).eval()
        self.history_ = []
        self.n_iter_ = 0
        self._set_statistics()
        return self

    def _set_statistics(self):
        self.channel_mean_ = self.module_.channel_mean.double().cpu().numpy()
        self.channel_std_ = self.module_.channel_std.double().cpu().numpy()
        self.embedding_dim_ = self.module_.embedding_dim

    @property
    def _n_features_out(self):
        # The width get_feature_names_out names (ClassNamePrefixFeaturesOutMixin).
        return self.embedding_dim_

    # ------------------------------------------------------------ transform
    def transform(self, X):
        """Week embeddings.

        Parameters
        ----------
        X : array-like of shape (n_weeks, T, V) or (n_weeks, T * V)

        Returns
        -------
        ndarray of shape (n_weeks, embedding_dim)
            In X's floating dtype.
        """
        check_is_fitted(self)
        weeks = validate_weeks(self, X, reset=False)
        device = self._device()
        module = self.module_.to(device).eval()
        dtype = getattr(torch, self.dtype)
        out = []
        with torch.inference_mode(), progress(total=len(weeks), verbose=self.verbose,
                                              desc=f"{type(self).__name__} transform", unit="week") as bar:
            for start in range(0, len(weeks), max(1, self.batch_size)):
                batch = torch.as_tensor(weeks[start:start + self.batch_size], dtype=dtype, device=device)
                out.append(module.embed(batch).cpu().numpy())
                bar.update(len(batch))
        embeddings = np.concatenate(out) if out else np.empty((0, self.embedding_dim_))
        return embeddings.astype(weeks.dtype, copy=False)

    def save(self, path):
        """Write the fitted encoder to ``path`` for ``WearableEncoder(pretrained=path)``.

        Returns
        -------
        str
            The file's SHA-256.
        """
        check_is_fitted(self)
        config = {**self.config_, "n_channels": self.n_channels_, "n_timesteps": self.n_timesteps_}
        return save_module(path, self.module_, config, dict(self.provenance_))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.three_d_input = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _group_members(groups):
    order = np.argsort(groups, kind="stable")
    _, starts = np.unique(groups[order], return_index=True)
    return np.split(order, starts[1:])
