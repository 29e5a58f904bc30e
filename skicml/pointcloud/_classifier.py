"""``GAPromptClassifier``: parameter-efficient fine-tuning of a point-cloud transformer."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ..base import LogitsClassifierMixin, TorchEstimatorMixin, seeded, warn_user
from ..utils.param_validation import (
    HasMethods,
    Integral,
    Interval,
    Real,
    StrOptions,
    fit_context,
    shared_constraints,
)
from ..utils.validation import check_no_missing_labels
from ._backbone import resolve_backbone
from ._input import validate_point_clouds
from ._model import PEFT_METHODS, GAPromptNetwork

__all__ = ["DTYPES", "Augmented", "GAPromptClassifier", "exempt_from_weight_decay", "forward_in_batches", "read_clouds",
           "rotate_clouds"]

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def rotate_clouds(points, kind="y", generator=None):
    """Random rotations of clouds ``(B, N, 3)``: about the vertical (y) axis or uniform over SO(3).

    Parameters
    ----------
    points : torch.Tensor of shape (B, N, 3)
    kind : {"y", "so3"}, default="y"
    generator : torch.Generator or None

    Returns
    -------
    torch.Tensor of shape (B, N, 3)
    """
    batch = points.shape[0]
    if kind == "y":
        angle = (torch.rand(batch, generator=generator, device=points.device, dtype=points.dtype) * 2 - 1) * math.pi
        cos, sin = torch.cos(angle), torch.sin(angle)
        zero, one = torch.zeros_like(angle), torch.ones_like(angle)
        rotation = torch.stack([cos, zero, sin, zero, one, zero, -sin, zero, cos], dim=-1).reshape(batch, 3, 3)
    else:
        # A Haar-uniform rotation: QR of a Gaussian matrix with its signs fixed.
        gaussian = torch.randn(batch, 3, 3, generator=generator, device=points.device, dtype=points.dtype)
        q, r = torch.linalg.qr(gaussian)
        q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]
        rotation = q * torch.where(torch.det(q) < 0, -1.0, 1.0)[:, None, None]
    return points @ rotation.to(points.dtype).transpose(1, 2)


def read_clouds(estimator, X, reset):
    """Clouds ``(n, n_points, 3)`` as a tensor of ``estimator.dtype``, normalised when it asks."""
    clouds = validate_point_clouds(estimator, X, reset=reset, normalize=estimator.normalize)
    return torch.as_tensor(np.ascontiguousarray(clouds)).to(DTYPES[estimator.dtype])


def exempt_from_weight_decay(name, parameter):
    """Point-MAE's rule, which GAPrompt keeps: biases, norms (1-D) and tokens train without weight decay."""
    return parameter.ndim <= 1 or name.endswith(".bias") or "token" in name


def forward_in_batches(function, clouds, batch_size, device):
    """``function`` over batches of ``clouds`` on ``device`` without gradients, as one float64 array."""
    out = []
    with torch.inference_mode():
        for start in range(0, len(clouds), batch_size):
            out.append(function(clouds[start:start + batch_size].to(device)).double().cpu())
    return torch.cat(out).numpy()


class Augmented(torch.nn.Module):
    """A network with training-time augmentation of its input clouds.

    ``augment`` is ``"rotate_y"``, ``"rotate_so3"``, a callable on a
    ``(B, N, 3)`` tensor or None; the network's output is returned as it is
    (logits, or a pretraining loss).
    """

    def __init__(self, network, augment):
        super().__init__()
        self.network = network
        self.augment = augment

    def forward(self, points):
        if self.training and self.augment is not None:
            if callable(self.augment):
                points = self.augment(points)
            else:
                points = rotate_clouds(points, "y" if self.augment == "rotate_y" else "so3")
        if self.training and len(points) == 1:
            # Batch norm has no statistics of one cloud (torch refuses it): a lone cloud, the last batch of
            # n = k * batch_size + 1 clouds or a training set of one, is normalised with the running
            # statistics. The official loader drops every incomplete last batch instead (drop_last=True),
            # which would train nothing on fewer clouds than a batch.
            with _running_batch_norm(self.network):
                return self.network(points)
        return self.network(points)


@contextlib.contextmanager
def _running_batch_norm(module):
    """The batch-norm layers of ``module`` that are training use (and keep) their running statistics."""
    norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training]
    for norm in norms:
        norm.eval()
    try:
        yield
    finally:
        for norm in norms:
            norm.train()


class GAPromptClassifier(LogitsClassifierMixin, TransformerMixin, TorchEstimatorMixin, ClassifierMixin,
                         BaseEstimator):
    """Classify point clouds by GAPrompt: geometry-aware prompts on a frozen Point-MAE backbone.

    Only the prompts, the Point Shift Prompter, the adapters, the class token
    and the head train (a few percent of the weights); the pretrained
    backbone stays frozen, batch-norm statistics included. ``peft`` runs the
    baselines on the same code path: the head alone (``"linear"``), full
    fine-tuning, deep token prompts alone and adapters alone. Trained
    through skicml's shared loop, with the best epoch on a validation split
    kept. Clouds are resampled to ``n_points`` by farthest point sampling,
    centred and scaled to the unit sphere.

    Parameters
    ----------
    pretrained : str, path-like, torch.nn.Module or None, default="tiny-pointmae"
        The backbone: a shipped name, a checkpoint path (skicml's own or an
        official Point-MAE ``pretrain.pth``), ``"point-mae-pretrain"`` (the
        authors' published ShapeNet checkpoint, read from the torch.hub
        cache or downloaded once into it; see :ref:`published_models`; the
        paper reads it with ``n_groups=64, group_size=32`` at 1,024 points),
        a module following the backbone protocol (see
        :class:`PointMAEBackbone`), or None for random weights of the shipped
        architecture.
    n_points : int, default=512
        Points per cloud after resampling.
    n_groups : int, default=64
        Tokens per cloud (farthest-point centres).
    group_size : int, default=16
        Points per neighbourhood.
    n_point_prompts : int, default=5
        Learnable points appended to every cloud.
    point_prompt_range : float, default=0.01
        Their initial coordinates are uniform in ``[-range, range]``.
    point_prompt_factor : float, default=5.0
        Factor on the point prompts (a learning-rate multiplier in effect).
    shift_net : bool, default=True
        Use the Point Shift Prompter and its shape vector.
    shift_scale : float, default=0.2
        ``x' = x + shift_scale * delta(x) * x`` (the paper: 0.05 to 0.8).
    shift_net_width : int or None, default=None
        Widest layer of the Point Shift Prompter (the official 64; its other
        layers and the shape MLP scale with it). None follows the
        backbone's width: ``round(64 * trans_dim / 384)``, 21 on the shipped
        backbone.
    n_token_prompts : int, default=10
        Deep token prompts per prompted block.
    prompt_depth : int or None, default=None
        Blocks with token prompts; None is half the backbone's depth.
    adapter_dim : int or None, default=None
        Bottleneck width of the adapters (0: none). None is the official 16.
    adapter_scale : float, default=0.7
    shape_feature_weight : float, default=0.5
        Weight of the shape vector added to prompts and adapter inputs.
    propagation : {"after_attention", "before_attention"} or None, default="after_attention"
    propagation_weight : float, default=0.3
    interp_neighbors : int or None, default=3
        Neighbours of the inverse-distance interpolations (None: all of the
        coarser points, as the official prompt propagation).
    head_hidden : int or None, default=None
        Width of the head's two hidden layers (0: a linear head). None is a
        linear head: the official head (``head_hidden=256``) is the largest
        new module, 10% of the shipped backbone's parameters on its own; the
        linear head keeps GAPrompt's trainable share at the paper's
        (2.2-2.8%) and trained faster on the benchmark.
    head_dropout : float, default=0.5
    peft : {"gaprompt", "linear", "full", "prompt", "adapter"}, default="gaprompt"
    freeze_backbone_bn : bool, default=True
        Keep a frozen backbone in eval mode while training, so its
        batch-norm statistics stay those of pretraining (the official code
        lets them drift).
    zero_init : bool, default=False
        Start the shift head, the adapters' up-projections and the last head
        layer at zero, so that the first forward is the plain backbone.
    normalize : bool, default=True
        Centre each cloud and scale it to the unit sphere.
    augment : {"rotate_y", "rotate_so3"}, callable or None, default="rotate_y"
        Training-time augmentation; a callable maps a ``(B, N, 3)`` tensor
        to one of the same shape.
    max_epochs : int, default=60
    batch_size : int, default=32
        Clouds a training step. A step of one cloud (the last batch of
        ``k * batch_size + 1`` training clouds, or a training set of one)
        normalises it with the batch-norm layers' running statistics, which
        it leaves as they are; the official loader drops every incomplete
        last batch instead.
    lr : float, default=5e-4
    weight_decay : float, default=0.05
        AdamW's decoupled weight decay, as in the official code not applied
        to biases, other 1-D parameters and tokens (names holding "token").
    warmup_epochs : int, default=5
    validation_fraction : float or None, default=0.1
        Share of the clouds held out (stratified) to select the best epoch.
    n_iter_no_change : int or None, default=None
        Stop after this many epochs without a better validation loss; None
        runs every epoch and keeps the best.
    dtype : {"float32", "float64"}, default="float32"
    device : str or torch.device, default="auto"
    random_state : int, RandomState instance or None, default=None
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    module_ : GAPromptNetwork
        The trained network, in eval mode.
    n_trainable_params_ : int
    trainable_ratio_ : float
        Trainable parameters over all parameters (backbone included).
    history_ : pandas.DataFrame
        ``epoch``, ``train_loss``, ``valid_loss`` and ``seconds`` per epoch.
    best_epoch_ : int
    n_iter_ : int
        Epochs run.
    provenance_ : dict
        Where the backbone's weights came from.
    n_features_in_ : int
        Columns of a 2-D ``X`` (flattened ``x, y, z`` triples).

    See Also
    --------
    PointMAEPretrainer : Pretrains the backbone this classifier prompts.

    Notes
    -----
    Two deliberate departures from the released code: neighbourhood gathers
    are per sample (the official prompt propagation mixes the clouds of a
    batch), and farthest point sampling starts at the point farthest from
    the centroid rather than at index 0, so predictions depend neither on
    the batch nor on the order of a cloud's points.

    Examples
    --------
    >>> from skicml.datasets import make_point_clouds
    >>> from skicml.pointcloud import GAPromptClassifier
    >>> data = make_point_clouds(100, n_points=128, random_state=0)
    >>> model = GAPromptClassifier(n_points=128, n_groups=16, group_size=8, max_epochs=1,
    ...                            random_state=0).fit(data.points, data.target)
    >>> model.predict(data.points[:3]).shape
    (3,)
    >>> round(model.trainable_ratio_, 3) < 0.2
    True

    On the shipped width-128 backbone the defaults train 2.6% of the
    parameters, the paper's share; the official widths (a 256-wide head and
    a Shift Prompter of width 64) are explicit parameters.
    """

    _parameter_constraints = {
        "pretrained": [*shared_constraints("pretrained")["pretrained"], HasMethods(["group", "embed", "pos"])],
        "n_points": [Interval(Integral, 1, None, closed="left")],
        "n_groups": [Interval(Integral, 1, None, closed="left")],
        "group_size": [Interval(Integral, 1, None, closed="left")],
        "n_point_prompts": [Interval(Integral, 0, None, closed="left")],
        "point_prompt_range": [Interval(Real, 0, None, closed="left")],
        "point_prompt_factor": [Interval(Real, None, None, closed="neither")],
        "shift_net": ["boolean"],
        "shift_scale": [Interval(Real, None, None, closed="neither")],
        "shift_net_width": [Interval(Integral, 2, None, closed="left"), None],
        "n_token_prompts": [Interval(Integral, 0, None, closed="left")],
        "prompt_depth": [Interval(Integral, 0, None, closed="left"), None],
        "adapter_dim": [Interval(Integral, 0, None, closed="left"), None],
        "adapter_scale": [Interval(Real, None, None, closed="neither")],
        "shape_feature_weight": [Interval(Real, None, None, closed="neither")],
        "propagation": [StrOptions({"after_attention", "before_attention"}), None],
        "propagation_weight": [Interval(Real, None, None, closed="neither")],
        "interp_neighbors": [Interval(Integral, 1, None, closed="left"), None],
        "head_hidden": [Interval(Integral, 0, None, closed="left"), None],
        "head_dropout": [Interval(Real, 0, 1, closed="left")],
        "peft": [StrOptions(set(PEFT_METHODS))],
        "freeze_backbone_bn": ["boolean"],
        "zero_init": ["boolean"],
        "normalize": ["boolean"],
        "augment": [StrOptions({"rotate_y", "rotate_so3"}), callable, None],
        "warmup_epochs": [Interval(Integral, 0, None, closed="left")],
        "dtype": [StrOptions(set(DTYPES))],
        **shared_constraints("max_epochs", "batch_size", "lr", "weight_decay", "validation_fraction",
                             "n_iter_no_change", "device", "random_state", "verbose"),
    }

    def __init__(self, pretrained="tiny-pointmae", n_points=512, n_groups=64, group_size=16, n_point_prompts=5,
                 point_prompt_range=0.01, point_prompt_factor=5.0, shift_net=True, shift_scale=0.2,
                 shift_net_width=None, n_token_prompts=10, prompt_depth=None, adapter_dim=None, adapter_scale=0.7,
                 shape_feature_weight=0.5, propagation="after_attention", propagation_weight=0.3,
                 interp_neighbors=3, head_hidden=None, head_dropout=0.5, peft="gaprompt", freeze_backbone_bn=True,
                 zero_init=False, normalize=True, augment="rotate_y", max_epochs=60, batch_size=32, lr=5e-4,
                 weight_decay=0.05, warmup_epochs=5, validation_fraction=0.1, n_iter_no_change=None,
                 dtype="float32", device="auto", random_state=None, verbose="auto"):
        self.pretrained = pretrained
        self.n_points = n_points
        self.n_groups = n_groups
        self.group_size = group_size
        self.n_point_prompts = n_point_prompts
        self.point_prompt_range = point_prompt_range
        self.point_prompt_factor = point_prompt_factor
        self.shift_net = shift_net
        self.shift_scale = shift_scale
        self.shift_net_width = shift_net_width
        self.n_token_prompts = n_token_prompts
        self.prompt_depth = prompt_depth
        self.adapter_dim = adapter_dim
        self.adapter_scale = adapter_scale
        self.shape_feature_weight = shape_feature_weight
        self.propagation = propagation
        self.propagation_weight = propagation_weight
        self.interp_neighbors = interp_neighbors
        self.head_hidden = head_hidden
        self.head_dropout = head_dropout
        self.peft = peft
        self.freeze_backbone_bn = freeze_backbone_bn
        self.zero_init = zero_init
        self.normalize = normalize
        self.augment = augment
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.warmup_epochs = warmup_epochs
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ input
    def _clouds(self, X, reset):
        return read_clouds(self, X, reset)

    def _check_grouping(self):
        if self.n_groups > self.n_points + self.n_point_prompts * (self.peft == "gaprompt"):
            raise ValueError(
                f"n_groups={self.n_groups} exceeds the {self.n_points} points of a cloud (n_points) plus "
                f"its point prompts: lower n_groups or raise n_points."
            )
        if self.group_size > self.n_points:
            raise ValueError(f"group_size={self.group_size} exceeds n_points={self.n_points}.")

    # -------------------------------------------------------------------- fit
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Train the prompts, adapters and head (or what ``peft`` says) on clouds ``X``.

        Parameters
        ----------
        X : ndarray of shape (n_clouds, n_points, 3), list of (n_i, 3) arrays, or (n_clouds, 3 * n_points)
            Clouds; a 2-D array holds flattened ``x, y, z`` triples.
        y : array-like of shape (n_clouds,)

        Returns
        -------
        self
        """
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        self._check_grouping()
        clouds = self._clouds(X, reset=True)
        y = column_or_1d(y, warn=True)
        if len(y) != len(clouds):
            raise ValueError(f"X has {len(clouds)} clouds but y has {len(y)} labels.")
        check_no_missing_labels(y)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        targets = torch.as_tensor(encoder.transform(y).astype(np.int64))
        seed = self._seed()
        with seeded(seed):  # pretrained=None draws random weights: from the seed, not torch's global state
            backbone, self.provenance_ = resolve_backbone(self.pretrained, num_group=self.n_groups,
                                                          group_size=self.group_size)
        with seeded(seed):
            network = GAPromptNetwork(
                backbone, len(self.classes_), peft=self.peft, shift_net=self.shift_net,
                shift_scale=self.shift_scale, shift_net_width=self.shift_net_width,
                n_point_prompts=self.n_point_prompts,
                point_prompt_range=self.point_prompt_range, point_prompt_factor=self.point_prompt_factor,
                n_token_prompts=self.n_token_prompts, prompt_depth=self.prompt_depth,
                adapter_dim=self.adapter_dim, adapter_scale=self.adapter_scale,
                shape_feature_weight=self.shape_feature_weight, propagation=self.propagation,
                propagation_weight=self.propagation_weight, interp_neighbors=self.interp_neighbors,
                head_hidden=self.head_hidden, head_dropout=self.head_dropout,
                freeze_backbone_bn=self.freeze_backbone_bn, zero_init=self.zero_init,
            ).to(DTYPES[self.dtype])
        self.n_trainable_params_ = sum(p.numel() for p in network.trainable_parameters())
        self.trainable_ratio_ = self.n_trainable_params_ / sum(p.numel() for p in network.parameters())
        validation = self._validation_fraction(targets)
        # Without early stopping asked for, every epoch runs and the best one on validation is kept.
        patience = self.n_iter_no_change
        if patience is None and validation:
            patience = self.max_epochs
        module, history = self._fit_module(
            Augmented(network, self.augment), clouds, targets, loss="cross_entropy", grad_clip=10.0,
            validation_fraction=validation, stratify=validation is not None, n_iter_no_change=patience,
            warmup_fraction=min(1.0, self.warmup_epochs / max(self.max_epochs, 1)),
            no_weight_decay=exempt_from_weight_decay, seed=seed,
        )
        self.module_ = module.network.eval()
        self.history_ = pd.DataFrame({
            "epoch": np.arange(1, history.n_epochs + 1),
            "train_loss": history.train_loss,
            "valid_loss": history.valid_loss if history.valid_loss else np.nan,
            "seconds": history.epoch_seconds,
        })
        self.best_epoch_ = history.best_epoch
        self.n_iter_ = history.n_epochs
        return self

    def _validation_fraction(self, targets):
        """``validation_fraction``, or None when its stratified split cannot hold every class."""
        if not self.validation_fraction:
            return None
        n_valid = math.ceil(len(targets) * self.validation_fraction)
        counts = np.bincount(targets.numpy())
        if n_valid < len(counts) or counts.min() < 2 or len(targets) - n_valid < len(counts):
            warn_user(
                f"validation_fraction={self.validation_fraction} of {len(targets)} clouds cannot hold every one "
                f"of the {len(counts)} classes; training on all clouds without a validation split (the last "
                f"epoch is kept).", UserWarning,
            )
            return None
        return self.validation_fraction

    # ---------------------------------------------------------------- predict
    def _forward(self, X, method):
        check_is_fitted(self)
        clouds = self._clouds(X, reset=False)
        device = self._device()
        network = self.module_.to(device).eval()
        return forward_in_batches(getattr(network, method), clouds, self.batch_size, device)

    def _class_logits(self, X):
        return self._forward(X, "forward")

    def transform(self, X):
        """The head's input: ``[CLS, max over point tokens, shape vector]``.

        Parameters
        ----------
        X : ndarray of shape (n_clouds, n_points, 3), list of (n_i, 3) arrays, or (n_clouds, 3 * n_points)

        Returns
        -------
        ndarray of shape (n_clouds, 3 * trans_dim)
        """
        return self._forward(X, "features")

    def shift_points(self, X):
        """The clouds after the Point Shift Prompter (as the backbone sees them, prompts excluded).

        Parameters
        ----------
        X : ndarray of shape (n_clouds, n_points, 3), list of (n_i, 3) arrays, or (n_clouds, 3 * n_points)

        Returns
        -------
        ndarray of shape (n_clouds, n_points, 3)
            Normalised input coordinates, shifted.
        """
        check_is_fitted(self)
        clouds = self._clouds(X, reset=False)
        network = self.module_.to(self._device()).eval()
        with torch.inference_mode():
            shifted, _ = network.shift(clouds.to(self._device()))
        return shifted.double().cpu().numpy()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.three_d_input = True
        return tags
