"""``PointMAEPretrainer``: masked point modelling on unlabelled clouds."""

from __future__ import annotations


import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._weights import save_module
from ..base import TorchEstimatorMixin, seeded
from ..utils.param_validation import (
    HasMethods,
    Integral,
    Interval,
    Real,
    StrOptions,
    fit_context,
    shared_constraints,
)
from ._backbone import resolve_backbone
from ._classifier import DTYPES, Augmented, exempt_from_weight_decay, forward_in_batches, read_clouds
from ._model import PointMAE, PointMAEBackbone

__all__ = ["PointMAEPretrainer"]


class PointMAEPretrainer(TorchEstimatorMixin, TransformerMixin, BaseEstimator):
    """Pretrain a Point-MAE backbone by masked point modelling, then embed clouds with it.

    A share ``mask_ratio`` of each cloud's neighbourhoods is hidden; the
    backbone encodes the visible ones, a small decoder predicts the points of
    the hidden ones, and the Chamfer-L2 distance to the true points is the
    loss. The backbone is what :class:`GAPromptClassifier` prompts; this is
    the estimator behind the shipped ``"tiny-pointmae"``.

    Parameters
    ----------
    trans_dim : int, default=128
    depth : int, default=6
    num_heads : int, default=4
    n_points : int, default=512
    n_groups : int, default=64
    group_size : int, default=16
    mask_ratio : float, default=0.6
    decoder_depth : int, default=2
    decoder_heads : int, default=4
    drop_path_rate : float, default=0.1
    pretrained : str, path-like, torch.nn.Module or None, default=None
        Start from these backbone weights (a shipped name, a path, the
        published ``"point-mae-pretrain"`` or a module) instead of random
        ones; the architecture is then theirs.
    normalize : bool, default=True
        Centre each cloud and scale it to the unit sphere.
    augment : {"rotate_y", "rotate_so3"} or None, default="rotate_y"
    max_epochs : int, default=100
    batch_size : int, default=32
    lr : float, default=1e-3
    weight_decay : float, default=0.05
        Not applied to biases, other 1-D parameters and tokens, as in Point-MAE.
    dtype : {"float32", "float64"}, default="float32"
    device : str or torch.device, default="auto"
    random_state : int, RandomState instance or None, default=None
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.

    Attributes
    ----------
    module_ : PointMAE
        Backbone and decoder, in eval mode.
    backbone_ : PointMAEBackbone
        The pretrained backbone (``module_.backbone``).
    history_ : dict
        ``train_loss`` per epoch.
    n_iter_ : int
    n_features_in_ : int
        Columns of a 2-D ``X``.

    Examples
    --------
    >>> from skicml.datasets import make_point_clouds
    >>> from skicml.pointcloud import PointMAEPretrainer
    >>> clouds = make_point_clouds(16, n_points=64, random_state=0).points
    >>> mae = PointMAEPretrainer(trans_dim=16, depth=1, num_heads=2, n_points=64, n_groups=8,
    ...                          group_size=8, max_epochs=1, random_state=0).fit(clouds)
    >>> mae.transform(clouds).shape
    (16, 32)
    """

    _parameter_constraints = {
        "trans_dim": [Interval(Integral, 1, None, closed="left")],
        "depth": [Interval(Integral, 1, None, closed="left")],
        "num_heads": [Interval(Integral, 1, None, closed="left")],
        "n_points": [Interval(Integral, 1, None, closed="left")],
        "n_groups": [Interval(Integral, 2, None, closed="left")],
        "group_size": [Interval(Integral, 1, None, closed="left")],
        "mask_ratio": [Interval(Real, 0, 1, closed="neither")],
        "decoder_depth": [Interval(Integral, 1, None, closed="left")],
        "decoder_heads": [Interval(Integral, 1, None, closed="left")],
        "drop_path_rate": [Interval(Real, 0, 1, closed="left")],
        "pretrained": [*shared_constraints("pretrained")["pretrained"], HasMethods(["group", "embed", "pos"])],
        "normalize": ["boolean"],
        "augment": [StrOptions({"rotate_y", "rotate_so3"}), None],
        "dtype": [StrOptions(set(DTYPES))],
        **shared_constraints("max_epochs", "batch_size", "lr", "weight_decay", "device", "random_state",
                             "verbose"),
    }

    def __init__(self, trans_dim=128, depth=6, num_heads=4, n_points=512, n_groups=64, group_size=16,
                 mask_ratio=0.6, decoder_depth=2, decoder_heads=4, drop_path_rate=0.1, pretrained=None,
                 normalize=True, augment="rotate_y", max_epochs=100, batch_size=32, lr=1e-3, weight_decay=0.05,
                 dtype="float32", device="auto", random_state=None, verbose="auto"):
        self.trans_dim = trans_dim
        self.depth = depth
        self.num_heads = num_heads
        self.n_points = n_points
        self.n_groups = n_groups
        self.group_size = group_size
        self.mask_ratio = mask_ratio
        self.decoder_depth = decoder_depth
        self.decoder_heads = decoder_heads
        self.drop_path_rate = drop_path_rate
        self.pretrained = pretrained
        self.normalize = normalize
        self.augment = augment
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _build(self, seed):
        with seeded(seed):
            if self.pretrained is None:
                backbone = PointMAEBackbone(self.trans_dim, self.depth, self.num_heads, self.n_groups,
                                            self.group_size, drop_path_rate=self.drop_path_rate)
            else:
                backbone, _ = resolve_backbone(self.pretrained, num_group=self.n_groups,
                                               group_size=self.group_size)
            return PointMAE(backbone, self.mask_ratio, self.decoder_depth, self.decoder_heads)

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Pretrain on unlabelled clouds ``X``.

        Parameters
        ----------
        X : ndarray of shape (n_clouds, n_points, 3), list of (n_i, 3) arrays, or (n_clouds, 3 * n_points)
        y : None
            Ignored.

        Returns
        -------
        self
        """
        if self.group_size > self.n_points or self.n_groups > self.n_points:
            raise ValueError(
                f"n_groups={self.n_groups} and group_size={self.group_size} must not exceed "
                f"n_points={self.n_points}."
            )
        clouds = read_clouds(self, X, reset=True)
        seed = self._seed()
        mae = self._build(seed).to(DTYPES[self.dtype])
        module, history = self._fit_module(Augmented(mae, self.augment), clouds, None, loss=None,
                                           grad_clip=10.0, warmup_fraction=0.05,
                                           no_weight_decay=exempt_from_weight_decay, seed=seed)
        self.module_ = module.network.eval()
        self.history_ = {"train_loss": list(history.train_loss)}
        self.n_iter_ = history.n_epochs
        return self

    @property
    def backbone_(self):
        check_is_fitted(self, "module_")
        return self.module_.backbone

    def transform(self, X):
        """Pooled backbone features: the max and the mean of each cloud's tokens.

        Parameters
        ----------
        X : ndarray of shape (n_clouds, n_points, 3), list of (n_i, 3) arrays, or (n_clouds, 3 * n_points)

        Returns
        -------
        ndarray of shape (n_clouds, 2 * trans_dim)
        """
        check_is_fitted(self, "module_")
        clouds = read_clouds(self, X, reset=False)
        device = self._device()
        backbone = self.module_.backbone.to(device).eval()

        def pooled(batch):
            tokens = backbone(batch)
            return torch.cat([tokens.amax(dim=1), tokens.mean(dim=1)], dim=-1)

        return forward_in_batches(pooled, clouds, self.batch_size, device)

    def reconstruction_loss(self, X):
        """Mean masked-reconstruction Chamfer loss on clouds ``X`` (masks drawn from ``random_state``)."""
        check_is_fitted(self, "module_")
        clouds = read_clouds(self, X, reset=False)
        mae = self.module_.to(self._device()).eval()
        losses = []
        with torch.inference_mode(), seeded(self._seed()):
            for start in range(0, len(clouds), self.batch_size):
                batch = clouds[start:start + self.batch_size].to(self._device())
                losses.append(float(mae(batch)) * len(batch))
        return float(np.sum(losses) / len(clouds))

    def save_backbone(self, path, provenance=None):
        """Write the backbone in skicml's format, loadable as ``GAPromptClassifier(pretrained=path)``.

        Parameters
        ----------
        path : str or path-like
        provenance : dict or None
            How it was made (added to the estimator's own parameters).

        Returns
        -------
        str
            The file's SHA-256.
        """
        check_is_fitted(self, "module_")
        backbone = self.backbone_
        config = {k: v for k, v in backbone.config.items() if k not in ("num_group", "group_size")}
        record = {"estimator": "PointMAEPretrainer", "params": {
            k: v for k, v in self.get_params().items() if isinstance(v, (int, float, str, bool, type(None)))},
            "epochs": self.n_iter_, "final_loss": self.history_["train_loss"][-1] if self.history_["train_loss"]
            else None, **(provenance or {})}
        return save_module(path, backbone, config, record, create_folder=False)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.three_d_input = True
        return tags
