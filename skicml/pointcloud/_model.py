"""Point-MAE and GAPrompt (Ai et al., ICML 2025) in plain torch.

A cloud of ``N`` points is read by a Point-MAE backbone as ``G`` tokens:

1. grouping: farthest point sampling picks ``G`` centres, each centre's
   ``M`` nearest points form its neighbourhood, expressed relative to it;
2. a mini-PointNet embeds every neighbourhood into one token;
3. an MLP embeds every centre's coordinates; the result is added to the
   input of *every* transformer block (the Point-MAE convention);
4. pre-norm transformer blocks and a final layer norm.

:class:`PointMAE` pretrains the backbone by masked point modelling: 60% of
the tokens are hidden, a small decoder predicts the points of the hidden
neighbourhoods, scored by the Chamfer distance.

:class:`GAPromptNetwork` adapts a frozen backbone to a classification task
with GAPrompt's geometry-aware prompts (spec section 2):

- the *Point Shift Prompter* (:class:`ShiftNet`), a tiny PointNet++ that
  moves every input point by ``shift_scale * delta(x) * x`` and summarises
  the cloud in a global shape vector ``g``;
- *point prompts*, a few learnable 3-D points appended to the cloud before
  the backbone groups it;
- deep *token prompts* (``E_l + 0.5 g + pos(c_p)``) inserted after the
  class token in the first ``prompt_depth`` blocks and removed after each;
- *prompt propagation* in every block: point tokens are max-pooled over a
  second level of neighbourhoods among the centres and spread back by
  inverse-distance interpolation;
- bottleneck *adapters* after every block, reading ``x + 0.5 g`` in the
  prompted blocks;
- a head over ``[CLS, max over point tokens, g]``.

Two departures from the released code, both for correctness:

- neighbourhood gathers are done per sample. The official propagation
  flattens the batch and indexes it with offsets that ignore the inserted
  prompt tokens, so in the prompted blocks a cloud's result depends on the
  other clouds of its batch (spec section 2.5);
- farthest point sampling starts at the point farthest from the centroid
  (ties to the lexicographically smallest point), not at index 0, so
  predictions do not depend on the order of a cloud's points.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..ops import (
    chamfer_distance,
    farthest_point_sample,
    group_points,
    knn,
    three_nn_interpolate,
)

__all__ = [
    "PAPER_WIDTHS",
    "PEFT_METHODS",
    "GAPromptNetwork",
    "PointMAE",
    "PointMAEBackbone",
    "ShiftNet",
    "default_widths",
    "fourier_features",
    "group_cloud",
    "invariant_start_index",
    "order_free_centroid",
]

#: The fine-tuning methods :class:`GAPromptNetwork` runs on one code path.
PEFT_METHODS = ("gaprompt", "linear", "full", "prompt", "adapter")


# --------------------------------------------------------------------------
# grouping
# --------------------------------------------------------------------------
def order_free_centroid(x):
    """(n, 1, 3) float64 centroids of (n, N, 3) clouds, summed over sorted
    coordinates: exactly the same however the points are ordered."""
    if x.device.type == "cpu" and not x.requires_grad:
        # numpy's vectorised sort is an order of magnitude faster than torch's on CPU
        ordered = torch.from_numpy(np.sort(np.ascontiguousarray(x.numpy().transpose(0, 2, 1)), axis=2))
    else:
        ordered = torch.sort(x.transpose(1, 2), dim=2).values
    return ordered.to(torch.float64).mean(dim=2)[:, None, :]


def invariant_start_index(clouds):
    """Per cloud, the index of the point farthest from its centroid, independent of point order.

    Ties (equally far points) go to the lexicographically smallest
    ``(x, y, z)``, then to the lowest index, so farthest point sampling
    started there picks the same points, in the same order, however the
    points of the cloud are shuffled (copies of one point are
    interchangeable). The official Point-MAE code starts at index 0, which
    makes its groups depend on the order of the points.

    Parameters
    ----------
    clouds : ndarray or tensor of shape (n_samples, N, 3)

    Returns
    -------
    LongTensor of shape (n_samples,)
        On the device of ``clouds`` when it is a tensor.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.pointcloud._model import invariant_start_index
    >>> cloud = np.array([[[0., 0., 0.], [3., 0., 0.], [1., 0., 0.], [-3., 0., 0.]]])
    >>> invariant_start_index(cloud).tolist()
    [3]
    """
    x = clouds if isinstance(clouds, torch.Tensor) else torch.as_tensor(np.asarray(clouds))
    if x.ndim != 3 or x.shape[-1] != 3 or x.shape[1] == 0:
        raise ValueError(f"invariant_start_index: expected clouds of shape (n, N >= 1, 3), got {tuple(x.shape)}.")
    wide = x.to(torch.float64)
    centroid = order_free_centroid(x)
    distance = ((wide - centroid) ** 2).sum(-1)
    best = distance == distance.amax(dim=1, keepdim=True)
    for axis in range(3):
        coordinate = wide[..., axis]
        lowest = torch.where(best, coordinate, torch.inf).amin(dim=1, keepdim=True)
        best &= coordinate == lowest
    return best.to(torch.uint8).argmax(dim=1)


def group_cloud(points, n_groups, group_size):
    """Farthest-point centres and their nearest neighbours, per cloud.

    Parameters
    ----------
    points : torch.Tensor of shape (B, N, 3)
    n_groups, group_size : int

    Returns
    -------
    centers : torch.Tensor of shape (B, n_groups, 3)
    center_index : torch.Tensor of shape (B, n_groups), int64
    neighbour_index : torch.Tensor of shape (B, n_groups, group_size), int64
        Ascending distance: a centre is its own first neighbour.
    """
    center_index = farthest_point_sample(points, n_groups, invariant_start_index(points.detach()))
    centers = points.gather(1, center_index[..., None].expand(-1, -1, points.shape[-1]))
    _, neighbour_index = knn(centers.detach(), points.detach(), group_size)
    return centers, center_index, neighbour_index


def fourier_features(x, n_frequencies=4):
    """``[x, sin(2^j x), cos(2^j x)]`` for ``j < n_frequencies`` (NeRF's encoding, x kept)."""
    parts = [x]
    for j in range(n_frequencies):
        parts += [torch.sin(2.0 ** j * x), torch.cos(2.0 ** j * x)]
    return torch.cat(parts, dim=-1)


# --------------------------------------------------------------------------
# the Point-MAE backbone (the official module and parameter names)
# --------------------------------------------------------------------------
class MiniPointNet(nn.Module):
    """Point-MAE's group embedding: neighbourhoods ``(B, G, M, 3)`` to tokens ``(B, G, C)``.

    A shared point MLP, a max over the group concatenated back to every
    point, a second shared MLP and a final max; ``channels`` are its hidden
    widths, ``(128, 256, 512)`` in Point-MAE.
    """

    def __init__(self, encoder_channel, channels=(128, 256, 512)):
        super().__init__()
        first, second, third = channels
        self.encoder_channel = encoder_channel
        self.first_conv = nn.Sequential(
            nn.Conv1d(3, first, 1), nn.BatchNorm1d(first), nn.ReLU(inplace=True), nn.Conv1d(first, second, 1)
        )
        self.second_conv = nn.Sequential(
            nn.Conv1d(2 * second, third, 1), nn.BatchNorm1d(third), nn.ReLU(inplace=True),
            nn.Conv1d(third, encoder_channel, 1),
        )

    def forward(self, neighbourhoods):
        # The 1x1 convolutions run as matrix products over all points of all groups ((B * G * M, C) rows),
        # about 25% faster on a CPU than the convolutions, forward and backward, with the same weights.
        # Maxima over a group take ``max`` (one winner per channel, as the official ``torch.max``), whose
        # backward scatters the gradient to it; ``amax`` splits it over ties through a dense mask, 3-4 times
        # slower, and GAPrompt backpropagates through this module to its shifted and prompt points.
        batch, groups, size, _ = neighbourhoods.shape
        conv1, norm1, _, conv2 = self.first_conv
        conv3, norm2, _, conv4 = self.second_conv
        feature = F.linear(neighbourhoods.reshape(-1, 3), conv1.weight[..., 0], conv1.bias)
        feature = F.linear(F.relu(norm1(feature)), conv2.weight[..., 0], conv2.bias)
        feature = feature.reshape(batch * groups, size, -1)
        pooled = feature.max(dim=1, keepdim=True).values
        feature = torch.cat([pooled.expand(-1, size, -1), feature], dim=2).reshape(batch * groups * size, -1)
        feature = F.linear(F.relu(norm2(F.linear(feature, conv3.weight[..., 0], conv3.bias))), conv4.weight[..., 0],
                           conv4.bias)
        return feature.reshape(batch * groups, size, -1).max(dim=1).values.reshape(batch, groups, self.encoder_channel)


class DropPath(nn.Module):
    """Stochastic depth: zero a residual branch per sample with probability ``p``."""

    def __init__(self, p=0.0):
        super().__init__()
        self.p = p

    def forward(self, x):
        return drop_path(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


def drop_path(x, p, training):
    if p == 0.0 or not training:
        return x
    keep = x.new_empty((x.shape[0],) + (1,) * (x.dim() - 1)).bernoulli_(1 - p)
    return x * keep / (1 - p)


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"trans_dim={dim} must be divisible by num_heads={num_heads}.")
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        batch, length, dim = x.shape
        q, k, v = self.qkv(x).reshape(batch, length, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(batch, length, dim))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """A pre-norm transformer block; its parts are used one by one by GAPrompt."""

    def __init__(self, dim, num_heads, mlp_ratio=4.0, drop_path=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads)
        self.drop_path = DropPath(drop_path)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x):
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self.mlp(self.norm2(x)))


def _depth_rates(rate, depth):
    return [rate * i / max(depth - 1, 1) for i in range(depth)]


class PointMAEBackbone(nn.Module):
    """Point-MAE's encoder: the ``PointTokenBackbone`` GAPrompt prompts.

    The protocol GAPrompt relies on: :meth:`group`, :meth:`embed`,
    :meth:`pos`, ``blocks`` (pre-norm blocks with ``norm1``, ``attn``,
    ``norm2``, ``mlp``) and ``norm``. Parameter names follow the official
    ``MaskTransformer`` (``encoder.first_conv...``, ``pos_embed...``,
    ``norm``), with ``blocks.i`` for the official ``blocks.blocks.i``.

    Parameters
    ----------
    trans_dim : int, default=128
    depth : int, default=6
    num_heads : int, default=4
    num_group : int, default=64
        Tokens per cloud, ``G``.
    group_size : int, default=16
        Points per neighbourhood, ``M``.
    mlp_ratio : float, default=4.0
    drop_path_rate : float, default=0.1
        Stochastic depth of the last block (linear from 0), in pretraining.
    encoder_channels : tuple of 3 int, default=(128, 256, 512)
        Hidden widths of the mini-PointNet (Point-MAE's).
    """

    def __init__(self, trans_dim=128, depth=6, num_heads=4, num_group=64, group_size=16, mlp_ratio=4.0,
                 drop_path_rate=0.1, encoder_channels=(128, 256, 512)):
        super().__init__()
        self.config = {"trans_dim": trans_dim, "depth": depth, "num_heads": num_heads, "num_group": num_group,
                       "group_size": group_size, "mlp_ratio": mlp_ratio, "drop_path_rate": drop_path_rate,
                       "encoder_channels": list(encoder_channels)}
        self.trans_dim = trans_dim
        self.num_group = num_group
        self.group_size = group_size
        self.encoder = MiniPointNet(trans_dim, tuple(encoder_channels))
        self.pos_embed = nn.Sequential(nn.Linear(3, 128), nn.GELU(), nn.Linear(128, trans_dim))
        self.blocks = nn.ModuleList(
            Block(trans_dim, num_heads, mlp_ratio, rate) for rate in _depth_rates(drop_path_rate, depth)
        )
        self.norm = nn.LayerNorm(trans_dim)

    def group(self, points):
        """Centres ``(B, G, 3)`` and neighbourhoods ``(B, G, M, 3)`` relative to them."""
        centers, _, neighbour_index = group_cloud(points, self.num_group, self.group_size)
        neighbourhoods = group_points(points, neighbour_index) - centers[:, :, None]
        return centers, neighbourhoods

    def embed(self, neighbourhoods):
        return self.encoder(neighbourhoods)

    def pos(self, centers):
        return self.pos_embed(centers)

    def forward(self, points):
        """Normalised tokens ``(B, G, D)`` of clouds ``(B, N, 3)``."""
        centers, neighbourhoods = self.group(points)
        return self.encode(self.embed(neighbourhoods), self.pos(centers))

    def encode(self, tokens, pos):
        x = tokens
        for block in self.blocks:
            x = block(x + pos)
        return self.norm(x)


class PointMAE(nn.Module):
    """Masked point modelling on a :class:`PointMAEBackbone` (Point-MAE's pretraining).

    ``forward(points)`` returns the loss: the mean Chamfer-L2 distance
    between the predicted and the true points of the masked neighbourhoods
    (each relative to its centre).

    Parameters
    ----------
    backbone : PointMAEBackbone
    mask_ratio : float, default=0.6
    decoder_depth : int, default=2
    decoder_heads : int, default=4
    """

    def __init__(self, backbone, mask_ratio=0.6, decoder_depth=2, decoder_heads=4):
        super().__init__()
        dim = backbone.trans_dim
        self.backbone = backbone
        self.mask_ratio = mask_ratio
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.decoder_pos_embed = nn.Sequential(nn.Linear(3, 128), nn.GELU(), nn.Linear(128, dim))
        self.decoder_blocks = nn.ModuleList(
            Block(dim, decoder_heads, drop_path=rate) for rate in _depth_rates(0.1, decoder_depth)
        )
        self.decoder_norm = nn.LayerNorm(dim)
        self.increase_dim = nn.Conv1d(dim, 3 * backbone.group_size, 1)
        nn.init.trunc_normal_(self.mask_token, std=0.02)

    def n_masked(self):
        return min(self.backbone.num_group - 1, max(1, round(self.mask_ratio * self.backbone.num_group)))

    def forward(self, points):
        backbone = self.backbone
        centers, neighbourhoods = backbone.group(points)
        batch, groups, size, _ = neighbourhoods.shape
        n_masked = self.n_masked()
        order = torch.rand(batch, groups, device=points.device).argsort(dim=1)
        masked, visible = order[:, :n_masked], order[:, n_masked:]

        def take(values, index):
            return values.gather(1, index.reshape(batch, -1, *[1] * (values.dim() - 2)).expand(
                -1, -1, *values.shape[2:]))

        tokens = backbone.embed(take(neighbourhoods, visible))
        encoded = backbone.encode(tokens, backbone.pos(take(centers, visible)))
        x = torch.cat([encoded, self.mask_token.expand(batch, n_masked, -1)], dim=1)
        pos = self.decoder_pos_embed(torch.cat([take(centers, visible), take(centers, masked)], dim=1))
        for block in self.decoder_blocks:
            x = block(x + pos)
        predicted = self.increase_dim(self.decoder_norm(x[:, -n_masked:]).transpose(1, 2))
        predicted = predicted.transpose(1, 2).reshape(batch * n_masked, size, 3)
        target = take(neighbourhoods, masked).reshape(batch * n_masked, size, 3)
        return chamfer_distance(predicted, target).mean()


# --------------------------------------------------------------------------
# GAPrompt: the Point Shift Prompter
# --------------------------------------------------------------------------
def _conv_bn_relu(channels, conv):
    layers = []
    for n_in, n_out in zip(channels[:-1], channels[1:]):
        norm = nn.BatchNorm2d(n_out) if conv is nn.Conv2d else nn.BatchNorm1d(n_out)
        layers += [conv(n_in, n_out, 1), norm, nn.ReLU()]
    return nn.Sequential(*layers)


class SetAbstraction(nn.Module):
    """FPS centres, the features of their nearest points through a shared MLP, max-pooled."""

    def __init__(self, n_groups, group_size, in_channels, channels):
        super().__init__()
        self.n_groups = n_groups
        self.group_size = group_size
        self.mlp = _conv_bn_relu([in_channels, *channels], nn.Conv2d)

    def forward(self, xyz, features):
        centers, _, neighbour_index = group_cloud(xyz, self.n_groups, self.group_size)
        grouped = group_points(features, neighbour_index)          # (B, G, M, C)
        pooled = self.mlp(grouped.permute(0, 3, 2, 1)).max(dim=2).values  # (B, C', G)
        return centers, pooled.transpose(1, 2)


class FeaturePropagation(nn.Module):
    """Inverse-distance interpolation onto finer points, concatenated with their features, MLP."""

    def __init__(self, in_channels, channels, n_neighbors):
        super().__init__()
        self.n_neighbors = n_neighbors
        self.mlp = _conv_bn_relu([in_channels, *channels], nn.Conv1d)

    def forward(self, xyz_fine, xyz_coarse, features_fine, features_coarse):
        k = min(self.n_neighbors, xyz_coarse.shape[1])
        interpolated = three_nn_interpolate(xyz_fine.detach(), xyz_coarse.detach(), features_coarse, k=k,
                                            eps=1e-4)
        joined = torch.cat([features_fine, interpolated], dim=-1)
        return self.mlp(joined.transpose(1, 2)).transpose(1, 2)


class ShiftNet(nn.Module):
    """GAPrompt's Point Shift Prompter: a per-point shift and a global shape vector.

    ``forward(x)`` returns ``x + scale * delta(x) * x`` (points at the origin
    never move) and the flattened level-2 features ``(B, n_groups // 2 *
    top_center_dim)``. The shift head is not zero-initialised (the official
    choice), so the cloud is already deformed at the first step, unless
    ``zero_init``.

    ``width`` is the widest layer: the official widths are ``width=64``
    (set abstractions 64-32-64 and 64-32-8, propagations 64-32 and 32-32, a
    32-64-3 shift head, ``top_center_dim=8``); a narrower ``width`` scales
    them all, ``top_center_dim`` included when it is None.
    """

    def __init__(self, n_groups=64, group_size=16, shift_scale=0.2, n_neighbors=3, n_frequencies=4,
                 top_center_dim=None, zero_init=False, width=64):
        super().__init__()
        if n_groups < 2 or group_size < 2:
            raise ValueError(f"ShiftNet needs n_groups >= 2 and group_size >= 2, got {n_groups}, {group_size}.")
        if width < 2:
            raise ValueError(f"ShiftNet needs width >= 2, got {width}.")
        half = max(1, round(width / 2))
        top_center_dim = max(1, round(width / 8)) if top_center_dim is None else top_center_dim
        self.n_frequencies = n_frequencies
        self.shift_scale = shift_scale
        encoded = 3 * (2 * n_frequencies + 1)
        self.abstraction_level1 = SetAbstraction(n_groups, group_size, encoded, [width, half, width])
        self.abstraction_level2 = SetAbstraction(n_groups // 2, group_size // 2, width, [width, half, top_center_dim])
        self.propagation2 = FeaturePropagation(width + top_center_dim, [width, half], n_neighbors)
        self.propagation1 = FeaturePropagation(encoded + half, [half, half], n_neighbors)
        self.mlp_position = nn.Sequential(nn.Linear(half, width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, 3))
        for layer in self.mlp_position:
            if isinstance(layer, nn.Linear):
                nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5.0))
                nn.init.zeros_(layer.bias)
        if zero_init:
            nn.init.zeros_(self.mlp_position[-1].weight)
        self.shape_dim = n_groups // 2 * top_center_dim

    def forward(self, x):
        encoded = fourier_features(x, self.n_frequencies)
        center1, feature1 = self.abstraction_level1(x, encoded)
        center2, feature2 = self.abstraction_level2(center1, feature1)
        feature1 = self.propagation2(center1, center2, feature1, feature2)
        per_point = self.propagation1(x, center1, encoded, feature1)
        shifted = x + self.mlp_position(per_point) * self.shift_scale * x
        return shifted, feature2.reshape(x.shape[0], -1)


# --------------------------------------------------------------------------
# GAPrompt: adapters, propagation, the network
# --------------------------------------------------------------------------
class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class Adapter(nn.Module):
    """``scale * up(dropout(QuickGELU(down(LN(x)))))``, a bottleneck added to the block's output."""

    def __init__(self, dim, bottleneck, scale=0.7, dropout=0.1, zero_init=False):
        super().__init__()
        self.scale = scale
        self.layer_norm = nn.LayerNorm(dim)
        self.down = nn.Linear(dim, bottleneck)
        self.activate = QuickGELU()
        self.dropout = nn.Dropout(dropout)
        self.up = nn.Linear(bottleneck, dim)
        for layer in (self.down, self.up):
            nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5.0))
            nn.init.normal_(layer.bias, std=1e-6)
        if zero_init:
            nn.init.zeros_(self.up.weight)
            nn.init.zeros_(self.up.bias)

    def forward(self, x):
        return self.scale * self.up(self.dropout(self.activate(self.down(self.layer_norm(x)))))


def _head(in_dim, hidden, dropout, n_classes):
    if hidden == 0:
        return nn.Linear(in_dim, n_classes)
    head = nn.Sequential(
        nn.Linear(in_dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(dropout),
        nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(dropout),
        nn.Linear(hidden, n_classes),
    )
    for layer in head:
        if isinstance(layer, nn.Linear):
            nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5.0))
    return head


#: The official GAPrompt widths, for Point-MAE's 384-wide backbone.
PAPER_WIDTHS = {"trans_dim": 384, "head_hidden": 256, "adapter_dim": 16, "shift_net_width": 64}


def default_widths(trans_dim):
    """The widths of GAPrompt's new modules for a backbone of width ``trans_dim``.

    The official code fixes them for Point-MAE's width 384 (a head of two
    256-wide hidden layers, adapters of bottleneck 16, a Shift Prompter of
    width 64 with a 16-wide shape MLP); on the shipped width-128, six-block
    backbone they trained 7.65% of the parameters, three times the paper's
    share (2.2-2.8%). The defaults:

    - the Shift Prompter (its shape MLP included) scales with
      ``trans_dim / 384``: width 64 at 384, 21 at 128;
    - the head is linear: the official head is the largest new module (58%
      of the official count) and does not shrink with a shallower backbone;
      on the shipped backbone a head scaled to a third of the width trained
      more slowly than the official one, a linear head faster (see
      doc/performance.rst, GAPrompt);
    - the adapters keep the official bottleneck of 16, the component that
      gains most on its own here.

    Parameters
    ----------
    trans_dim : int

    Returns
    -------
    dict
        ``head_hidden``, ``adapter_dim`` and ``shift_net_width``.

    Examples
    --------
    >>> from skicml.pointcloud._model import default_widths
    >>> default_widths(128)
    {'head_hidden': 0, 'adapter_dim': 16, 'shift_net_width': 21}
    >>> default_widths(384)
    {'head_hidden': 0, 'adapter_dim': 16, 'shift_net_width': 64}
    """
    scale = trans_dim / PAPER_WIDTHS["trans_dim"]
    return {"head_hidden": 0, "adapter_dim": PAPER_WIDTHS["adapter_dim"],
            "shift_net_width": max(2, round(PAPER_WIDTHS["shift_net_width"] * scale))}


#: Which components each fine-tuning method has, and whether the backbone trains.
_METHOD_COMPONENTS = {
    "gaprompt": dict(shift_net=None, point_prompts=None, token_prompts=None, propagation=None, adapters=None,
                     backbone_trains=False),
    "linear": dict(shift_net=False, point_prompts=False, token_prompts=False, propagation=False,
                   adapters=False, backbone_trains=False),
    "full": dict(shift_net=False, point_prompts=False, token_prompts=False, propagation=False,
                 adapters=False, backbone_trains=True),
    "prompt": dict(shift_net=False, point_prompts=False, token_prompts=None, propagation=False,
                   adapters=False, backbone_trains=False),
    "adapter": dict(shift_net=False, point_prompts=False, token_prompts=False, propagation=False,
                    adapters=None, backbone_trains=False),
}


class GAPromptNetwork(nn.Module):
    """A :class:`PointMAEBackbone` with GAPrompt's prompts and a classification head.

    ``peft`` chooses the method, all on this one code path: ``"gaprompt"``
    (the components the other arguments ask for), ``"linear"`` (the head
    alone on the frozen backbone), ``"full"`` (backbone and head train),
    ``"prompt"`` (deep token prompts only, VPT-deep) and ``"adapter"``
    (adapters only). What trains is set through ``requires_grad``;
    :meth:`train` keeps a frozen backbone in eval mode when
    ``freeze_backbone_bn`` (its batch-norm statistics never move).

    ``forward(points)`` maps normalised clouds ``(B, N, 3)`` to logits;
    :meth:`features` gives the head's input ``(B, 3 * D)``:
    ``[CLS, max over point tokens, shape vector]`` (zeros in the last slot
    without the shift network).
    """

    def __init__(self, backbone, n_classes, *, peft="gaprompt", shift_net=True, shift_scale=0.2,
                 n_point_prompts=5, point_prompt_range=0.01, point_prompt_factor=5.0, n_token_prompts=10,
                 prompt_depth=None, adapter_dim=None, adapter_scale=0.7, shape_feature_weight=0.5,
                 propagation="after_attention", propagation_weight=0.3, interp_neighbors=3, head_hidden=None,
                 head_dropout=0.5, drop_path_rate=0.1, freeze_backbone_bn=True, zero_init=False,
                 shift_net_width=None):
        super().__init__()
        if peft not in _METHOD_COMPONENTS:
            raise ValueError(f"peft={peft!r}; expected one of {PEFT_METHODS}.")
        chosen = _METHOD_COMPONENTS[peft]

        def wanted(name, asked):
            return asked if chosen[name] is None else chosen[name]

        dim = backbone.trans_dim
        depth = len(backbone.blocks)
        widths = default_widths(dim)
        head_hidden = widths["head_hidden"] if head_hidden is None else head_hidden
        adapter_dim = widths["adapter_dim"] if adapter_dim is None else adapter_dim
        shift_net_width = widths["shift_net_width"] if shift_net_width is None else shift_net_width
        self.widths = {"head_hidden": head_hidden, "adapter_dim": adapter_dim, "shift_net_width": shift_net_width}
        prompt_depth = depth // 2 if prompt_depth is None else prompt_depth
        if not 0 <= prompt_depth <= depth:
            raise ValueError(f"prompt_depth={prompt_depth} must lie in [0, {depth}], the backbone's depth.")
        self.backbone = backbone
        self.peft = peft
        self.backbone_trains = chosen["backbone_trains"]
        self.freeze_backbone_bn = freeze_backbone_bn
        self.shape_feature_weight = shape_feature_weight
        self.propagation = wanted("propagation", propagation) or None
        self.propagation_weight = propagation_weight
        self.interp_neighbors = interp_neighbors
        self.point_prompt_factor = point_prompt_factor
        self.drop_path_rates = _depth_rates(drop_path_rate, depth)

        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.cls_pos = nn.Parameter(torch.zeros(1, 1, dim))
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.cls_pos, std=0.02)

        self.shift_net = self.shape_feature_mlp = None
        if wanted("shift_net", shift_net):
            self.shift_net = ShiftNet(backbone.num_group, backbone.group_size, shift_scale,
                                      n_neighbors=interp_neighbors or backbone.num_group, zero_init=zero_init,
                                      width=shift_net_width)
            shape_hidden = max(1, round(shift_net_width / 4))    # 16 at the official width 64
            self.shape_feature_mlp = nn.Sequential(
                nn.Linear(self.shift_net.shape_dim, shape_hidden), nn.GELU(), nn.Dropout(0.25),
                nn.Linear(shape_hidden, dim)
            )
        n_point_prompts = n_point_prompts if wanted("point_prompts", True) else 0
        self.point_prompt = None
        if n_point_prompts:
            self.point_prompt = nn.Parameter(torch.empty(1, n_point_prompts, 3).uniform_(
                -point_prompt_range, point_prompt_range))
        n_token_prompts = n_token_prompts if wanted("token_prompts", True) else 0
        self.prompt_depth = prompt_depth if n_token_prompts else 0
        self.prompt_embeddings = self.prompt_cor = None
        if n_token_prompts and prompt_depth:
            self.prompt_embeddings = nn.Parameter(torch.zeros(prompt_depth, n_token_prompts, dim))
            self.prompt_cor = nn.Parameter(torch.zeros(n_token_prompts, 3))
            nn.init.trunc_normal_(self.prompt_cor, std=0.06)
        self.prompt_dropout = nn.Dropout(0.1)
        adapter_dim = adapter_dim if wanted("adapters", True) else 0
        self.adapter = None
        if adapter_dim:
            self.adapter = nn.ModuleList(
                Adapter(dim, adapter_dim, adapter_scale, zero_init=zero_init) for _ in range(depth))
        self.out_transform = None
        if self.propagation is not None:
            self.out_transform = nn.ModuleList(
                nn.Sequential(nn.BatchNorm1d(dim), nn.GELU()) for _ in range(depth))
        self.cls_head = _head(3 * dim, head_hidden, head_dropout, n_classes)
        if zero_init:
            last = self.cls_head if isinstance(self.cls_head, nn.Linear) else self.cls_head[-1]
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)
        self.backbone.requires_grad_(self.backbone_trains)

    # -- what trains -------------------------------------------------------
    def trainable_parameters(self):
        return [p for p in self.parameters() if p.requires_grad]

    def train(self, mode=True):
        super().train(mode)
        if mode and self.freeze_backbone_bn and not self.backbone_trains:
            self.backbone.eval()
        return self

    # -- forward -----------------------------------------------------------
    def shift(self, points):
        """The shifted clouds and the shape vector ``(B, 1, D)`` (zeros without a shift network)."""
        if self.shift_net is None:
            return points, points.new_zeros(points.shape[0], 1, self.backbone.trans_dim)
        shifted, shape = self.shift_net(points)
        return shifted, self.shape_feature_mlp(shape)[:, None]

    def features(self, points):
        backbone = self.backbone
        batch = points.shape[0]
        cloud, shape = self.shift(points)
        if self.point_prompt is not None:
            prompts = self.point_prompt_factor * self.point_prompt.to(cloud.dtype)
            cloud = torch.cat([cloud, prompts.expand(batch, -1, -1)], dim=1)
        centers, neighbourhoods = backbone.group(cloud)
        tokens = backbone.embed(neighbourhoods)
        level2 = None
        if self.propagation is not None:
            n_level2 = max(1, backbone.num_group // 2)
            level2_centers, level2_index, level2_neighbours = group_cloud(
                centers.detach(), n_level2, min(max(1, backbone.group_size // 2), backbone.num_group))
            level2 = (centers.detach(), level2_centers, level2_index, level2_neighbours)
        x = torch.cat([self.cls_token.expand(batch, -1, -1), tokens], dim=1)
        pos = torch.cat([self.cls_pos.expand(batch, -1, -1), backbone.pos(centers)], dim=1)
        prompt_pos = backbone.pos(self.prompt_cor) if self.prompt_cor is not None else None
        for layer, block in enumerate(backbone.blocks):
            x = self._block(layer, block, x + pos, shape, prompt_pos, level2)
        x = backbone.norm(x)
        return torch.cat([x[:, 0], x[:, 1:].amax(dim=1), shape[:, 0]], dim=-1)

    def forward(self, points):
        return self.cls_head(self.features(points))

    def _block(self, layer, block, x, shape, prompt_pos, level2):
        prompted = layer < self.prompt_depth
        shape_bias = self.shape_feature_weight * shape if self.shift_net is not None and prompted else None
        n_prompts = 0
        if prompted:
            prompts = self.prompt_dropout(self.prompt_embeddings[layer]).expand(x.shape[0], -1, -1)
            prompts = prompts + prompt_pos
            if self.shift_net is not None:
                prompts = prompts + self.shape_feature_weight * shape
            n_prompts = prompts.shape[1]
            x = torch.cat([x[:, :1], prompts, x[:, 1:]], dim=1)
        rate = self.drop_path_rates[layer]
        if self.propagation == "before_attention":
            x = self._propagate(layer, x, n_prompts, level2)
        x = x + drop_path(block.attn(block.norm1(x)), rate, self.training)
        x = x + drop_path(block.mlp(block.norm2(x)), rate, self.training)
        if self.propagation == "after_attention":
            x = self._propagate(layer, x, n_prompts, level2)
        if self.adapter is not None:
            # The class token is left out of the adapter, as in the released code.
            rest = x[:, 1:]
            adapter_input = rest if shape_bias is None else rest + shape_bias
            x = torch.cat([x[:, :1], rest + self.adapter[layer](adapter_input)], dim=1)
        if n_prompts:
            x = torch.cat([x[:, :1], x[:, 1 + n_prompts:]], dim=1)
        return x

    def _propagate(self, layer, x, n_prompts, level2):
        """Pool point tokens over level-2 neighbourhoods and spread the result back, per sample."""
        centers, level2_centers, level2_index, level2_neighbours = level2
        tokens = x[:, 1 + n_prompts:]
        grouped = group_points(tokens, level2_neighbours)                    # (B, G2, k, D)
        grouped = grouped + drop_path(grouped, self.drop_path_rates[layer], self.training)
        pooled = self.out_transform[layer](grouped.max(dim=2).values.transpose(1, 2)).transpose(1, 2)
        center_tokens = tokens.gather(1, level2_index[..., None].expand(-1, -1, tokens.shape[-1]))
        pooled = pooled + self.propagation_weight * center_tokens
        k = level2_centers.shape[1] if self.interp_neighbors is None else min(self.interp_neighbors,
                                                                               level2_centers.shape[1])
        spread = three_nn_interpolate(centers, level2_centers, pooled, k=k, eps=1e-8)
        return torch.cat([x[:, :1 + n_prompts], tokens + self.propagation_weight * spread], dim=1)
