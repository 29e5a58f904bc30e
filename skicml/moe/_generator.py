"""RaceDiTGenerator: the scikit-learn face of Race-DiT, a class-conditional image diffusion model."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d

from .._weights import load_module, save_module
from ..base import TorchEstimatorMixin, seed_from_random_state, seeded
from ..nn.moe import ROUTINGS, THRESHOLDED, routing_statistics
from ..utils.param_validation import Interval, StrOptions, fit_context, shared_constraints
from ..utils.validation import check_no_missing_labels
from ._model import RaceDiT

__all__ = ["RaceDiTGenerator"]

# The timesteps (as fractions of the schedule) and the noise seed of score_samples.
_SCORE_GRID = np.linspace(0.05, 0.95, 10)
_SCORE_NOISE_SEED = 12345


class _WeightAverage(torch.nn.Module):
    """An exponential moving average of a model's parameters, held in buffers so checkpoints carry it.

    The decay of the n-th update is ``min(decay, (1 + n) / (10 + n))``: a
    short run does not drag its random initialisation along.
    """

    def __init__(self, model, decay):
        super().__init__()
        self.decay = float(decay)
        self.n_params = 0
        for index, parameter in enumerate(model.parameters()):
            self.register_buffer(f"param{index}", parameter.detach().clone())
            self.n_params += 1
        self.register_buffer("n_updates", torch.zeros((), dtype=torch.int64))

    def averages(self):
        return [getattr(self, f"param{index}") for index in range(self.n_params)]

    @torch.no_grad()
    def update(self, model):
        self.n_updates += 1
        n = int(self.n_updates)
        decay = min(self.decay, (1 + n) / (10 + n))
        torch._foreach_lerp_(self.averages(), [p.detach() for p in model.parameters()], 1.0 - decay)

    @torch.no_grad()
    def copy_to(self, model):
        for average, parameter in zip(self.averages(), model.parameters()):
            parameter.copy_(average)


class _Objective(torch.nn.Module):
    """The network's training loss as ``forward``, for the shared loop; it records the loss's parts.

    With ``ema_decay`` every training forward first folds the current
    weights (those after the previous step) into the weight average.
    """

    def __init__(self, model, weights, ema_decay=None):
        super().__init__()
        self.model = model
        self.weights = weights
        self.average = None if ema_decay is None else _WeightAverage(model, ema_decay)
        self.parts = []

    def forward(self, images, labels=None):
        if self.training and self.average is not None:
            self.average.update(self.model)
        loss, parts = self.model.loss(images, labels, **self.weights)
        if self.training:
            self.parts.append(parts)
        return loss


@torch.no_grad()
def _calibrate_thresholds(model, images, labels, *, batch_size, seed, device):
    """Set each thresholded layer's inference thresholds from the K-th scores of ``model`` itself.

    The thresholds learned in training follow the live weights' routers;
    averaged weights score pairs a little differently, so their thresholds
    are the mean K-th largest scores over one pass of the training images at
    random timesteps.
    """
    layers = [layer for layer in model.moe_layers if layer.routing in THRESHOLDED]
    if not layers:
        return
    generator = torch.Generator().manual_seed(seed)
    modes = [layer.inference for layer in layers]
    totals = [0.0] * len(layers)
    model.eval()
    try:
        for layer in layers:
            layer.inference = "batch_topk"
        for start in range(0, len(images), batch_size):
            batch = images[start:start + batch_size]
            t = torch.randint(0, model.schedule.n_timesteps, (len(batch),), generator=generator)
            noise = torch.randn(batch.shape, generator=generator)
            batch_labels = None if labels is None else labels[start:start + batch_size].to(device)
            x_t = model.schedule.add_noise(batch.to(device), noise.to(device), t.to(device))
            _, aux = model(x_t, t.to(device), batch_labels)
            taus = [a["tau"] for a in aux if a]  # every layer of a model routes the same way
            totals = [total + tau.double() * len(batch) for total, tau in zip(totals, taus)]
    finally:
        for layer, mode in zip(layers, modes):
            layer.inference = mode
    for layer, total in zip(layers, totals):
        layer.tau_.copy_(total / len(images))


class RaceDiTGenerator(TorchEstimatorMixin, BaseEstimator):
    """Generate images with a diffusion transformer whose MLPs race for their experts (Race-DiT).

    A pixel-space DiT (DDPM, noise prediction) in which every block's MLP is
    an :class:`~skicml.nn.ExpertRaceMoE`: the (token, expert) pairs of the
    whole batch compete for ``top_k`` experts per token on average, so
    detailed patches and hard timesteps take more experts than flat
    background. Training adds the router-similarity loss (balance over
    experts and over pairs that fire together) and the per-layer
    regularization (each router predicts the noise too); sampling compares
    scores with the thresholds learned in training, so a sample never depends
    on the rest of its batch. ``routing="token_choice"`` or
    ``"expert_choice"`` and ``n_experts=0`` (a dense DiT) are the baselines
    on the same code path.

    Parameters
    ----------
    image_shape : tuple of int or None, default=None
        ``(H, W)`` or ``(C, H, W)`` of the images when ``X`` holds flat rows.
        ``None`` reads it from 3-D or 4-D ``X``; flat rows then become
        square one-channel images when their width is a square, else a
        ``1 x n_features`` strip.
    patch_size : int, default=2
        Side of the square patches (tokens); images whose shape was inferred
        from flat rows and do not split into them use 1.
    hidden_dim : int, default=64
    depth : int, default=4
    n_heads : int, default=4
    n_experts : int, default=8
        Experts of every MoE layer; 0 for the dense DiT baseline.
    top_k : float, default=2.0
        Experts per token (on average for Expert Race).
    routing : {"expert_race", "token_choice", "expert_choice", "bl_choice", "be_choice", "le_choice"}, \
            default="expert_race"
        Which (token, expert) pairs compete for the experts: the paper's six
        routings (Table 6), tabled in :mod:`skicml.nn.moe`.
    gating : {"identity", "softmax", "sigmoid"}, default="identity"
    threshold_momentum : float, default=0.99
    router_sim_weight : float, default=1e-2
    balance_loss_weight : float, default=0.0
        The Switch balance loss, for the token-choice baseline.
    per_layer_reg_weight : float, default=0.1
        Weight of the per-layer regularization, averaged over the layers; 0
        trains the heads not at all.
    n_timesteps : int, default=200
    beta_schedule : {"linear", "cosine"}, default="linear"
        Linear betas run from 1e-4 to 0.05.
    class_dropout : float, default=0.1
        Share of the labels dropped in training, for classifier-free guidance.
    max_epochs : int, default=150
        Epochs of the shared training loop (150 epochs of the 1,797 digits at
        ``batch_size=128`` are about 2,000 steps).
    batch_size : int, default=128
    lr : float, default=1e-3
        AdamW's learning rate (cosine decay). DiT's 1e-4 is for width 1152
        and 400,000 steps; on digits a width-64 model at 3e-4 still drew
        unrecognisable samples after 1,500 steps, at 1e-3 two thirds of them
        are read as their class (``benchmarks/bench_moe_digits.py``).
    weight_decay : float, default=0.0
    ema_decay : float or None, default=None
        Sample and score with an exponential moving average of the weights
        (DiT keeps one at 0.9999 over 400,000 steps); the decay of the n-th
        step is ``min(ema_decay, (1 + n) / (10 + n))``. The Expert Race
        thresholds are then measured again on the averaged model. ``None``
        keeps the final weights.
    pretrained : str, path-like or None, default=None
        Start from a trained network instead of random weights: a shipped
        name (``"race-dit-digits"``, see ``skicml info``) or the path of a
        file written by :meth:`save`. The file fixes the network (image
        shape, patch size, width, depth, heads, experts, routing, gating,
        schedule and number of classes; the constructor's values of these are
        not used), ``fit`` checks that ``X`` and ``y`` fit it and then trains
        ``max_epochs`` epochs more (0 samples from the file as it is).
    device : str or torch.device, default="auto"
    random_state : int, RandomState instance or None, default=None
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.

    Attributes
    ----------
    module_ : RaceDiT
        The trained network in eval mode.
    image_shape_ : tuple of int
        ``(C, H, W)`` of the images.
    patch_size_ : int
    n_features_in_ : int
        ``C * H * W``.
    classes_ : ndarray
        Labels seen in ``fit`` (only when ``y`` was given).
    data_min_, data_max_ : float
        The pixel range mapped to [-1, 1].
    thresholds_ : ndarray of shape (n_moe_layers,) or (n_moe_layers, n_groups)
        The inference threshold of each Expert Race layer (NaN for the
        per-sample routings); one per expert for ``"bl_choice"``, one per
        token position for ``"be_choice"``.
    expert_load_ : ndarray of shape (n_moe_layers, n_experts)
        Tokens each expert took during training.
    loss_curve_ : list of float
        Mean training loss of each epoch.
    aux_loss_curve_ : dict of str to list of float
        The loss's parts per epoch: ``denoise``, ``sim``, ``balance``, ``plr``.
    n_iter_ : int

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from skicml.moe import RaceDiTGenerator
    >>> digits = load_digits()
    >>> model = RaceDiTGenerator(hidden_dim=32, depth=2, max_epochs=2, random_state=0)
    >>> model.fit(digits.images[:200], digits.target[:200]).sample(3, y=[0, 1, 2], random_state=0).shape
    (3, 8, 8)
    """

    _parameter_constraints = {
        "image_shape": [tuple, list, None],
        "patch_size": [Interval(Integral, 1, None, closed="left")],
        "hidden_dim": [Interval(Integral, 4, None, closed="left")],
        "depth": [Interval(Integral, 1, None, closed="left")],
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        "n_experts": [Interval(Integral, 0, None, closed="left")],
        "top_k": [Interval(Real, 0, None, closed="neither")],
        "routing": [StrOptions(set(ROUTINGS))],
        "gating": [StrOptions({"identity", "softmax", "sigmoid"})],
        "threshold_momentum": [Interval(Real, 0, 1, closed="left")],
        "router_sim_weight": [Interval(Real, 0, None, closed="left")],
        "balance_loss_weight": [Interval(Real, 0, None, closed="left")],
        "per_layer_reg_weight": [Interval(Real, 0, None, closed="left")],
        "n_timesteps": [Interval(Integral, 1, None, closed="left")],
        "beta_schedule": [StrOptions({"linear", "cosine"})],
        "class_dropout": [Interval(Real, 0, 1, closed="left")],
        "ema_decay": [Interval(Real, 0, 1, closed="left"), None],
        **shared_constraints("max_epochs", "batch_size", "lr", "weight_decay", "pretrained", "device",
                             "random_state", "verbose"),
    }

    def __init__(self, image_shape=None, patch_size=2, hidden_dim=64, depth=4, n_heads=4, n_experts=8, top_k=2.0,
                 routing="expert_race", gating="identity", threshold_momentum=0.99, router_sim_weight=1e-2,
                 balance_loss_weight=0.0, per_layer_reg_weight=0.1, n_timesteps=200, beta_schedule="linear",
                 class_dropout=0.1, max_epochs=150, batch_size=128, lr=1e-3, weight_decay=0.0, ema_decay=None,
                 pretrained=None, device="auto", random_state=None, verbose="auto"):
        self.image_shape = image_shape
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.depth = depth
        self.n_heads = n_heads
        self.n_experts = n_experts
        self.top_k = top_k
        self.routing = routing
        self.gating = gating
        self.threshold_momentum = threshold_momentum
        self.router_sim_weight = router_sim_weight
        self.balance_loss_weight = balance_loss_weight
        self.per_layer_reg_weight = per_layer_reg_weight
        self.n_timesteps = n_timesteps
        self.beta_schedule = beta_schedule
        self.class_dropout = class_dropout
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.ema_decay = ema_decay
        self.pretrained = pretrained
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # ----------------------------------------------------------------- input
    def _images(self, X, reset):
        """``X`` as float32 images ``(n, C, H, W)`` in [-1, 1]; on reset also the shape, layout and range."""
        name = type(self).__name__
        array = check_array(X, allow_nd=True, dtype=[np.float64, np.float32], input_name="X", estimator=self)
        if array.ndim not in (2, 3, 4):
            raise ValueError(f"{name}: X has shape {array.shape}; expected images (n, H, W) or (n, C, H, W), "
                             "or flat rows (n, n_features).")
        if reset:
            self.input_ndim_ = array.ndim
            self.image_shape_, self.patch_size_ = self._shape_of(array)
            self.n_features_in_ = int(np.prod(self.image_shape_))
        elif array.ndim == 2 and array.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {array.shape[1]} features, but {name} is expecting {self.n_features_in_} "
                             "features as input.")
        elif array.ndim > 2 and tuple(array.shape[1:]) != self._layout_shape():
            raise ValueError(f"{name} was fitted on images of shape {self._layout_shape()}; got "
                             f"{tuple(array.shape[1:])}.")
        images = array.reshape(len(array), *self.image_shape_)
        if reset:
            self.data_min_, self.data_max_ = float(images.min()), float(images.max())
        span = self.data_max_ - self.data_min_
        # Constant images: any span maps them to -1, and sampling maps back to the constant.
        scale = 2.0 / span if span > 0 else 1.0
        return torch.as_tensor((images - self.data_min_) * scale - 1.0, dtype=torch.float32)

    def _shape_of(self, array):
        if array.ndim > 2 and self.image_shape is not None:
            given = tuple(int(v) for v in self.image_shape)
            found = tuple(array.shape[1:]) if len(given) == array.ndim - 1 else None
            if found != given:
                raise ValueError(f"image_shape={tuple(self.image_shape)} does not match the images of X, of "
                                 f"shape {tuple(array.shape[1:])}; image_shape is for flat rows (n, n_features): "
                                 "leave it None for 3-D or 4-D X.")
        if array.ndim == 4:
            shape, given = tuple(array.shape[1:]), True
        elif array.ndim == 3:
            shape, given = (1, *array.shape[1:]), True
        elif self.image_shape is not None:
            shape = tuple(int(v) for v in self.image_shape)
            shape, given = (shape if len(shape) == 3 else (1, *shape)), True
            if len(shape) != 3 or int(np.prod(shape)) != array.shape[1]:
                raise ValueError(f"image_shape={tuple(self.image_shape)} does not hold the {array.shape[1]} "
                                 "features of each row.")
        else:
            side = math.isqrt(array.shape[1])
            shape = (1, side, side) if side * side == array.shape[1] else (1, 1, array.shape[1])
            given = False
        _, height, width = shape
        if height % self.patch_size == 0 and width % self.patch_size == 0:
            return shape, self.patch_size
        if not given:
            return shape, 1
        raise ValueError(f"Images of {height}x{width} pixels do not split into patch_size={self.patch_size} "
                         "patches; crop or pad them, or choose a patch size that divides both sides.")

    def _layout_shape(self):
        return self.image_shape_ if self.input_ndim_ == 4 else self.image_shape_[1:]

    def _labels(self, y, n_samples, reset):
        if reset:
            if y is None:
                return None
            y = column_or_1d(y, warn=True)
            if len(y) != n_samples:
                raise ValueError(f"X has {n_samples} images but y has {len(y)} labels.")
            check_no_missing_labels(y)
            check_classification_targets(y)
            self.classes_, codes = np.unique(y, return_inverse=True)
            return torch.as_tensor(codes, dtype=torch.int64)
        if not hasattr(self, "classes_"):
            if y is not None:
                raise ValueError(f"{type(self).__name__} was fitted without labels; pass y=None.")
            return None
        if y is None:
            return None
        y = np.asarray(y).reshape(-1)
        unseen = np.setdiff1d(y, self.classes_)
        if len(unseen):
            raise ValueError(f"y holds labels not seen in fit: {unseen[:5].tolist()}; known: {self.classes_.tolist()}.")
        return torch.as_tensor(np.searchsorted(self.classes_, y), dtype=torch.int64)

    # ------------------------------------------------------------------- fit
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Train the diffusion model on images ``X``, conditioned on ``y`` when given.

        Parameters
        ----------
        X : array-like of shape (n, H, W), (n, C, H, W) or (n, n_features)
        y : array-like of shape (n,) or None
            Class labels for a class-conditional model.

        Returns
        -------
        self
        """
        if self.pretrained is None:
            self._check_architecture()
        images = self._images(X, reset=True)
        self.__dict__.pop("classes_", None)
        labels = self._labels(y, len(images), reset=True)
        channels, height, width = self.image_shape_
        seed = self._seed()
        if self.pretrained is not None:
            model, _, self.provenance_ = load_module(self.pretrained, self._pretrained_network)
            model.train()
        else:
            self.__dict__.pop("provenance_", None)
            with seeded(seed):
                model = RaceDiT(
                    image_size=(height, width), in_channels=channels, patch_size=self.patch_size_,
                    hidden_dim=self.hidden_dim, depth=self.depth, n_heads=self.n_heads,
                    n_classes=0 if labels is None else len(self.classes_), class_dropout=self.class_dropout,
                    n_experts=self.n_experts, top_k=self.top_k, routing=self.routing, gating=self.gating,
                    threshold_momentum=self.threshold_momentum, n_timesteps=self.n_timesteps,
                    beta_schedule=self.beta_schedule,
                )
        if self.pretrained is None and self.routing == "expert_choice" and self.n_experts:
            tokens = (height // self.patch_size_) * (width // self.patch_size_)
            if math.floor(self.top_k * tokens / self.n_experts) < 1:
                raise ValueError(f"expert_choice gives each of the {self.n_experts} experts floor(top_k * L / E) = 0 "
                                 f"of the {tokens} tokens of an image; lower n_experts or raise top_k.")
        objective = _Objective(model, {"sim_weight": self.router_sim_weight,
                                       "balance_weight": self.balance_loss_weight,
                                       "plr_weight": self.per_layer_reg_weight}, self.ema_decay)
        inputs = {"images": images} if labels is None else {"images": images, "labels": labels}
        if self.max_epochs:
            objective, history = self._fit_module(objective, inputs, None, loss=None, grad_clip=1.0, seed=seed)
            self.n_iter_, self.loss_curve_ = history.n_epochs, list(history.train_loss)
        else:
            # max_epochs=0: the pretrained network as it is (or the untrained control).
            self.n_iter_, self.loss_curve_ = 0, []
        self.module_ = objective.model.eval()
        if objective.average is not None and self.max_epochs:
            objective.average.update(self.module_)  # the weights of the last step
            objective.average.copy_to(self.module_)
            _calibrate_thresholds(self.module_, images, labels, batch_size=self.batch_size, seed=seed,
                                  device=next(self.module_.parameters()).device)
        steps_per_epoch = max(1, math.ceil(len(images) / self.batch_size))
        self.aux_loss_curve_ = {
            name: [float(np.mean([p[name] for p in objective.parts[e * steps_per_epoch:(e + 1) * steps_per_epoch]]))
                   for e in range(len(objective.parts) // steps_per_epoch)]
            for name in ("denoise", "sim", "balance", "plr")
        }
        layers = self.module_.moe_layers
        self.thresholds_ = np.array([layer.tau_.cpu().numpy() for layer in layers])
        self.expert_load_ = (np.stack([layer.expert_load_.cpu().numpy() for layer in layers]) if layers
                             else np.zeros((0, 0), dtype=np.int64))
        return self

    def _check_architecture(self):
        if self.routing == "token_choice" and int(self.top_k) != self.top_k:
            raise ValueError(f"top_k={self.top_k}: token choice gives every token a whole number of experts.")
        if self.n_experts and self.top_k > self.n_experts:
            raise ValueError(f"top_k={self.top_k} exceeds n_experts={self.n_experts}.")
        if self.hidden_dim % self.n_heads or self.hidden_dim % 4:
            raise ValueError(f"hidden_dim={self.hidden_dim} must be a multiple of n_heads={self.n_heads} and of 4.")

    def _pretrained_network(self, config):
        """The network a weights file describes, if the images and labels given to ``fit`` fit it."""
        file_shape = (config["in_channels"], *config["image_size"])
        if tuple(file_shape) != tuple(self.image_shape_):
            raise ValueError(f"pretrained={self.pretrained!r} generates images of shape (C, H, W) = "
                             f"{tuple(file_shape)}; X holds images of shape {tuple(self.image_shape_)}.")
        n_classes = len(self.classes_) if hasattr(self, "classes_") else 0
        if config["n_classes"] != n_classes:
            wanted = (f"y with {config['n_classes']} classes" if config["n_classes"]
                      else "y=None (it is unconditional)")
            raise ValueError(f"pretrained={self.pretrained!r} is a network for {config['n_classes'] or 'no'} "
                             f"classes; fit got {n_classes or 'no labels'}. Pass {wanted}.")
        self.patch_size_ = int(config["patch_size"])
        return RaceDiT(**dict(config, image_size=tuple(config["image_size"])))

    def save(self, path):
        """Write the fitted network to ``path`` for ``RaceDiTGenerator(pretrained=path)``.

        Parameters
        ----------
        path : str or path-like
            The file to write; its directory must exist.

        Returns
        -------
        str
            The file's SHA-256.
        """
        check_is_fitted(self)
        provenance = {"estimator": repr(self), "n_iter": int(self.n_iter_),
                      "pixel_range": [self.data_min_, self.data_max_]}
        return save_module(path, self.module_, self.module_.config, provenance, create_folder=False)

    # ------------------------------------------------------------ generation
    def _output(self, images):
        """Network images in [-1, 1] back to the input's scale and layout."""
        span = self.data_max_ - self.data_min_
        pixels = (images.double().cpu().numpy() + 1.0) / 2.0 * (span if span > 0 else 0.0) + self.data_min_
        if self.input_ndim_ == 2:
            return pixels.reshape(len(pixels), -1)
        return pixels if self.input_ndim_ == 4 else pixels[:, 0]

    def sample(self, n_samples=1, y=None, guidance_scale=1.0, n_steps=None, random_state=None):
        """Draw images from the trained model.

        Parameters
        ----------
        n_samples : int, default=1
        y : label, array-like of shape (n_samples,) or None
            Labels of a class-conditional model (one label for all, or one
            each); ``None`` draws them uniformly from ``classes_``.
        guidance_scale : float, default=1.0
            Classifier-free guidance; 1 is plain conditional sampling.
        n_steps : int or None, default=None
            Denoising steps (DDIM-strided when fewer than ``n_timesteps``).
        random_state : int, RandomState instance or None, default=None

        Returns
        -------
        ndarray
            ``n_samples`` images in the layout and pixel range of the
            training ``X``.
        """
        check_is_fitted(self)
        if int(n_samples) != n_samples or n_samples < 1:
            raise ValueError(f"n_samples={n_samples!r}; expected a whole number >= 1.")
        if isinstance(guidance_scale, bool) or not isinstance(guidance_scale, Real) \
                or not math.isfinite(guidance_scale):
            raise ValueError(f"guidance_scale={guidance_scale!r}; expected a finite number (1 is plain "
                             "conditional sampling).")
        n_timesteps = self.module_.schedule.n_timesteps
        if n_steps is not None and (isinstance(n_steps, bool) or not isinstance(n_steps, Integral)
                                    or not 1 <= n_steps <= n_timesteps):
            raise ValueError(f"n_steps={n_steps!r}; expected None or a whole number from 1 to the model's "
                             f"{n_timesteps} timesteps.")
        n_samples = int(n_samples)
        seed = seed_from_random_state(random_state)
        labels = None
        if hasattr(self, "classes_"):
            if y is None:
                rng = np.random.RandomState(seed)
                y = self.classes_[rng.randint(len(self.classes_), size=n_samples)]
            y = np.asarray(y)
            y = np.full(n_samples, y.item(), dtype=y.dtype) if y.ndim == 0 else y.reshape(-1)
            if len(y) != n_samples:
                raise ValueError(f"y has {len(y)} labels for n_samples={n_samples}.")
            labels = self._labels(y, n_samples, reset=False)
        elif y is not None:
            raise ValueError(f"{type(self).__name__} was fitted without labels; pass y=None.")
        device = self._device()
        model = self.module_.to(device).eval()
        generator = torch.Generator(device=device).manual_seed(seed)
        images = model.sample(n_samples, None if labels is None else labels.to(device), guidance_scale=guidance_scale,
                              n_steps=n_steps, generator=generator)
        return self._output(images)

    def _denoising_losses(self, X, y):
        images = self._images(X, reset=False)
        labels = self._labels(y, len(images), reset=False)
        if labels is not None and len(labels) != len(images):
            raise ValueError(f"X has {len(images)} images but y has {len(labels)} labels.")
        device = self._device()
        model = self.module_.to(device).eval()
        grid = np.unique(np.round(_SCORE_GRID * (model.schedule.n_timesteps - 1)).astype(int))
        # One noise image per timestep, shared by every sample: a sample's score never depends on its batch.
        noise = torch.randn((len(grid), 1, *self.image_shape_), generator=torch.Generator().manual_seed(
            _SCORE_NOISE_SEED)).to(device)
        losses = torch.zeros(len(images), dtype=torch.float64)
        with torch.inference_mode():
            for start in range(0, len(images), self.batch_size):
                batch = images[start:start + self.batch_size].to(device)
                batch_labels = None if labels is None else labels[start:start + self.batch_size].to(device)
                for t, eps in zip(grid, noise):
                    steps = torch.full((len(batch),), int(t), device=device)
                    eps = eps.expand_as(batch)
                    predicted, _ = model(model.schedule.add_noise(batch, eps, steps), steps, batch_labels)
                    losses[start:start + len(batch)] += (predicted - eps).square().flatten(1).mean(1).double().cpu()
        return (losses / len(grid)).numpy()

    def score_samples(self, X, y=None):
        """Negative denoising loss of each image on a fixed grid of timesteps and noise (higher is likelier).

        A Monte-Carlo proxy of the evidence bound: the mean squared error of
        the predicted noise at ten timesteps spread over the schedule, with
        one fixed noise image per timestep, so scores are deterministic and a
        sample's score does not depend on the others.

        Parameters
        ----------
        X : array-like of images or flat rows
        y : array-like of shape (n,) or None
            Labels for a class-conditional model (None scores it
            unconditionally, through the null label).

        Returns
        -------
        ndarray of shape (n,)
        """
        check_is_fitted(self)
        return -self._denoising_losses(X, y)

    def score(self, X, y=None):
        """Mean of :meth:`score_samples`.

        Returns
        -------
        float
        """
        return float(np.mean(self.score_samples(X, y)))

    def routing_report(self, X, y=None, t=None):
        """How the experts are used on images ``X`` at each timestep of ``t``, layer by layer.

        Parameters
        ----------
        X : array-like of images or flat rows
        y : array-like of shape (n,) or None
        t : int, sequence of int or None, default=None
            Timesteps (``None``: five spread over the schedule).

        Returns
        -------
        DataFrame
            One row per (layer, timestep, expert): ``load`` (tokens the
            expert took), and per (layer, timestep) ``experts_per_token_mean``,
            ``experts_per_token_std``, ``max_violation`` and
            ``combination_usage`` (see :func:`skicml.nn.moe.routing_statistics`).
        """
        check_is_fitted(self)
        steps = self._timesteps(t)
        rows = []
        for step, masks in zip(steps, self._routing_masks(X, y, steps)):
            for layer, mask in enumerate(masks):
                stats = routing_statistics(mask)
                for expert, load in enumerate(stats["load"].tolist()):
                    rows.append({"layer": layer, "timestep": int(step), "expert": expert, "load": load,
                                 **{k: v for k, v in stats.items() if k != "load"}})
        return pd.DataFrame(rows, columns=["layer", "timestep", "expert", "load", "experts_per_token_mean",
                                           "experts_per_token_std", "max_violation", "combination_usage"])

    def experts_per_token(self, X, y=None, t=None):
        """How many experts each token of each image takes, layer by layer, at timestep ``t``.

        The picture behind Expert Race: at inference each (token, expert)
        pair is kept when its score passes the layer's learned threshold, so
        strokes and low-noise timesteps can take more experts than flat
        background.

        Parameters
        ----------
        X : array-like of images or flat rows
        y : array-like of shape (n,) or None
        t : int or None, default=None
            The timestep the images are noised to (fixed noise, as in
            :meth:`routing_report`); ``None`` is the middle of the schedule.

        Returns
        -------
        ndarray of shape (n_images, n_moe_layers, H // patch_size, W // patch_size)
            Integer counts in ``[0, n_experts]``.
        """
        check_is_fitted(self)
        steps = self._timesteps(self.module_.schedule.n_timesteps // 2 if t is None else t)
        if len(steps) != 1:
            raise ValueError(f"t must be one timestep; got {len(steps)}.")
        masks = next(iter(self._routing_masks(X, y, steps)))
        _, height, width = self.image_shape_
        grid = (height // self.patch_size_, width // self.patch_size_)
        if not masks:
            return np.zeros((len(np.asarray(X)), 0, *grid), dtype=np.int64)
        counts = torch.stack([mask.sum(-1) for mask in masks], dim=1)  # (n, layers, tokens)
        return counts.reshape(len(counts), len(masks), *grid).numpy().astype(np.int64)

    def _timesteps(self, t):
        n_timesteps = self.module_.schedule.n_timesteps
        steps = (np.unique(np.linspace(0, n_timesteps - 1, 5).round().astype(int)) if t is None
                 else np.atleast_1d(np.asarray(t, dtype=int)))
        if np.any(steps < 0) or np.any(steps >= n_timesteps):
            raise ValueError(f"t must lie in [0, {n_timesteps - 1}]; got {steps.tolist()}.")
        return steps

    def _routing_masks(self, X, y, steps):
        """For each timestep of ``steps``, every MoE layer's mask ``(n, L, E)`` on ``X`` noised with fixed noise."""
        images = self._images(X, reset=False)
        labels = self._labels(y, len(images), reset=False)
        device = self._device()
        model = self.module_.to(device).eval()
        noise = torch.randn(images.shape, generator=torch.Generator().manual_seed(_SCORE_NOISE_SEED))
        with torch.inference_mode():
            for step in steps:
                masks = None
                for start in range(0, len(images), self.batch_size):
                    batch = images[start:start + self.batch_size].to(device)
                    timesteps = torch.full((len(batch),), int(step), device=device)
                    x_t = model.schedule.add_noise(batch, noise[start:start + len(batch)].to(device), timesteps)
                    batch_labels = None if labels is None else labels[start:start + len(batch)].to(device)
                    _, aux = model(x_t, timesteps, batch_labels)
                    batch_masks = [a["mask"].cpu() for a in aux if a]
                    masks = batch_masks if masks is None else [torch.cat([m, b]) for m, b in zip(masks, batch_masks)]
                yield masks or []

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.three_d_input = True
        tags.target_tags.required = False
        return tags
