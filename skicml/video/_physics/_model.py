"""The network of :class:`~skicml.video.VideoWorldModel`: a conditional video diffusion transformer.

A clip ``(B, T, C, H, W)`` of which the first ``n_cond`` frames are given
and the rest generated. Every frame is cut into patches (with one extra
channel marking the conditioning frames), so the clip is ``T x L`` tokens
with fixed sine-cosine positions in space and in time. Each layer attends
first within a frame (``L`` tokens, batched over the ``B * T`` frames), then
across time (``T`` tokens, batched over the ``B * L`` patch positions): the
factorised space-time attention of video DiTs, at the cost of ``T L (L + T)``
instead of ``(T L)^2``. Both halves are adaLN-Zero :class:`~skicml.nn.DiTBlock`
blocks conditioned on the flow time.

The objective is rectified flow (:class:`~skicml.nn.RectifiedFlow`): the
clip ``x1``, noise ``x0``, ``x_t = (1 - t) x0 + t x1`` with the conditioning
frames replaced by the clean ones, and the velocity ``x1 - x0`` regressed on
the generated frames only. The network outputs the *clean* frames, as a
change from the last conditioning frame, and the velocity is derived from
them, ``(x1_hat - x_t) / (1 - t)`` (Li and He's x-prediction, 2025): a token
of a few dozen channels cannot carry a pixel patch's noise through to a
velocity output (a patch of 8 x 8 x 3 values is 192 numbers), but it can
carry where the ball is, so the loss is the same velocity loss while the
network needs only the low-dimensional clean frame. Sampling integrates from
noise with the clean conditioning frames re-imposed at every evaluation
(their velocity is held at zero, and they are put back exactly at the end);
the last Euler step lands on the network's clean frames.

Training times are drawn from a logit-normal distribution leaning to noise
(``sigmoid(N(-0.8, 0.8))``, Li and He's choice for x-prediction) rather
than uniformly. In x-prediction the velocity loss weighs an error of the
clean frames by ``(1 - t)^-2``: under uniform times 77% of that weight
falls on ``t > 0.9``, where the future frames are nearly clean and their
motion can be read off them, and 3% on ``t < 0.5``, where it must be read
from the conditioning frames, which is what sampling from noise needs
(a network trained so ignored the given speed). The logit-normal puts 59%
of the weight on ``t < 0.5``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...nn import DiTBlock, DiTFinalLayer, RectifiedFlow, TimestepEmbedder
from ...nn.dit import patchify, sincos_position_embedding_2d, unpatchify

__all__ = ["TIME_SAMPLINGS", "VideoDiT", "flow_times"]

# The velocity (x1_hat - x_t) / (1 - t) is bounded near t = 1 by this floor on 1 - t.
_MIN_REMAINING_TIME = 0.05
# The flow time t in [0, 1] is spread over the sinusoids' range as DiT's
# integer timesteps are; without it every frequency but the lowest sees t as
# a constant.
_TIME_SCALE = 1000.0
# Training times sigmoid(N(mean, std)) of ``time_sampling="logit_normal"``
# (Li and He 2025; the median time is 0.31, mostly noise).
_LOGIT_NORMAL_MEAN, _LOGIT_NORMAL_STD = -0.8, 0.8
TIME_SAMPLINGS = ("logit_normal", "uniform")


def flow_times(n, time_sampling="logit_normal", *, device=None, dtype=torch.float32):
    """``n`` training times of the flow in (0, 1): logit-normal, leaning to noise, or uniform.

    Examples
    --------
    >>> import torch
    >>> from skicml.video._physics._model import flow_times
    >>> _ = torch.manual_seed(0)
    >>> bool(flow_times(10_000).median() < 0.35)
    True
    """
    if time_sampling == "uniform":
        return torch.rand(n, device=device, dtype=dtype)
    if time_sampling == "logit_normal":
        normal = torch.randn(n, device=device, dtype=dtype)
        return torch.sigmoid(_LOGIT_NORMAL_MEAN + _LOGIT_NORMAL_STD * normal)
    raise ValueError(f"time_sampling={time_sampling!r}; expected one of {TIME_SAMPLINGS}.")


def _sincos_1d(dim, length):
    positions = torch.arange(length, dtype=torch.float64)[:, None]
    omega = 1.0 / 10000 ** (torch.arange(dim // 2, dtype=torch.float64) / (dim / 2.0))
    return torch.cat([torch.sin(positions * omega), torch.cos(positions * omega)], dim=1).float()


class VideoDiT(nn.Module):
    """A flow-matching video DiT with factorised space-time attention, conditioned on its first frames.

    Parameters
    ----------
    n_frames : int
        Frames of a whole clip (conditioning and generated).
    frame_size : tuple of int, default=(32, 32)
        ``(H, W)``, multiples of ``patch_size``.
    channels : int, default=3
    patch_size : int, default=4
    dim : int, default=64
        Token width, a multiple of 4 and of ``n_heads``.
    depth : int, default=2
        Layers, each a spatial and a temporal block.
    n_heads : int, default=4
    mlp_ratio : float, default=4.0

    Examples
    --------
    >>> import torch
    >>> from skicml.video._physics._model import VideoDiT
    >>> _ = torch.manual_seed(0)
    >>> net = VideoDiT(n_frames=4, frame_size=(8, 8), dim=16, depth=1, n_heads=2)
    >>> clips = torch.rand(2, 4, 3, 8, 8) * 2 - 1
    >>> loss = net.loss(clips, n_cond=2)
    >>> out = net.sample(clips[:, :2], noise=torch.randn(2, 4, 3, 8, 8), n_steps=3)
    >>> tuple(out.shape), bool(torch.equal(out[:, :2], clips[:, :2]))
    ((2, 4, 3, 8, 8), True)
    """

    def __init__(self, n_frames, frame_size=(32, 32), channels=3, patch_size=4, dim=64, depth=2, n_heads=4,
                 mlp_ratio=4.0):
        super().__init__()
        height, width = (int(v) for v in frame_size)
        if height % patch_size or width % patch_size:
            raise ValueError(f"frames of {height}x{width} pixels do not split into patch_size={patch_size} "
                             "patches.")
        if dim % 4 or dim % n_heads:
            raise ValueError(f"dim={dim} must be a multiple of 4 and of n_heads={n_heads}.")
        self.n_frames, self.frame_size, self.channels, self.patch_size = int(n_frames), (height, width), channels, \
            patch_size
        self.config = {"n_frames": int(n_frames), "frame_size": [height, width], "channels": int(channels),
                       "patch_size": int(patch_size), "dim": int(dim), "depth": int(depth), "n_heads": int(n_heads),
                       "mlp_ratio": float(mlp_ratio)}
        self.grid = (height // patch_size, width // patch_size)
        self.x_embedder = nn.Linear(patch_size * patch_size * (channels + 1), dim)
        nn.init.xavier_uniform_(self.x_embedder.weight)
        nn.init.zeros_(self.x_embedder.bias)
        self.register_buffer("space_embed", sincos_position_embedding_2d(dim, *self.grid)[None, None],
                             persistent=False)
        self.register_buffer("time_embed", _sincos_1d(dim, self.n_frames)[None, :, None], persistent=False)
        self.t_embedder = TimestepEmbedder(dim)
        self.spatial_blocks = nn.ModuleList(DiTBlock(dim, n_heads, mlp_ratio) for _ in range(depth))
        self.temporal_blocks = nn.ModuleList(DiTBlock(dim, n_heads, mlp_ratio) for _ in range(depth))
        self.final_layer = DiTFinalLayer(dim, patch_size, channels)
        self.flow = RectifiedFlow()

    def forward(self, x, n_cond, t):
        """The clean clip ``(B, T, C, H, W)`` estimated from clips ``x`` (conditioning frames clean) at times ``t``."""
        batch, n_frames, channels, height, width = x.shape
        if n_frames != self.n_frames or (height, width) != self.frame_size or channels != self.channels:
            raise ValueError(f"clips of shape {tuple(x.shape[1:])}; the network was built for "
                             f"{(self.n_frames, self.channels, *self.frame_size)}.")
        is_cond = (torch.arange(n_frames, device=x.device) < n_cond).to(x.dtype)
        mask = is_cond[None, :, None, None, None].expand(batch, n_frames, 1, height, width)
        frames = torch.cat([x, mask], dim=2).reshape(batch * n_frames, channels + 1, height, width)
        tokens = self.x_embedder(patchify(frames, self.patch_size))
        n_tokens, dim = tokens.shape[1:]
        h = tokens.reshape(batch, n_frames, n_tokens, dim) + self.space_embed + self.time_embed
        c = self.t_embedder(t * _TIME_SCALE)
        c_frames, c_positions = c.repeat_interleave(n_frames, 0), c.repeat_interleave(n_tokens, 0)
        for spatial, temporal in zip(self.spatial_blocks, self.temporal_blocks):
            h, _ = spatial(h.reshape(batch * n_frames, n_tokens, dim), c_frames)
            h = h.reshape(batch, n_frames, n_tokens, dim).transpose(1, 2).reshape(batch * n_tokens, n_frames, dim)
            h, _ = temporal(h, c_positions)
            h = h.reshape(batch, n_tokens, n_frames, dim).transpose(1, 2)
        out = self.final_layer(h.reshape(batch * n_frames, n_tokens, dim), c_frames)
        out = unpatchify(out, self.patch_size, channels, self.frame_size)
        # A change from the last conditioning frame: at initialisation (zero
        # final layer) the model predicts that nothing moves.
        return x[:, n_cond - 1:n_cond] + out.reshape(batch, n_frames, channels, height, width)

    def velocity(self, x, n_cond, t):
        """The flow's velocity ``(x1_hat - x) / (1 - t)`` at clips ``x`` and times ``t`` (B,)."""
        remaining = (1 - t).clamp(min=_MIN_REMAINING_TIME).reshape(-1, 1, 1, 1, 1).to(x.dtype)
        return (self(x, n_cond, t) - x) / remaining

    def loss(self, clips, n_cond, time_sampling="logit_normal"):
        """Flow-matching loss of clean clips ``(B, T, C, H, W)`` in [-1, 1], on the generated frames only.

        ``time_sampling``: the distribution of the flow times, ``"logit_normal"``
        (leaning to noise, see the module's notes) or ``"uniform"``.
        """
        if time_sampling == "uniform":
            t, x_t, target = self.flow.training_pair(clips)  # the first version's draws, in its order
        else:
            t = flow_times(len(clips), time_sampling, device=clips.device, dtype=clips.dtype)
            x0 = torch.randn_like(clips)
            x_t, target = self.flow.interpolate(x0, clips, t), clips - x0
        x_t = torch.cat([clips[:, :n_cond], x_t[:, n_cond:]], dim=1)
        velocity = self.velocity(x_t, n_cond, t)
        return F.mse_loss(velocity[:, n_cond:], target[:, n_cond:])

    @torch.no_grad()
    def sample(self, cond, noise, *, n_steps=20, sampler="euler"):
        """Clips ``(B, T, C, H, W)`` whose first frames are exactly ``cond`` ``(B, n_cond, C, H, W)``.

        ``noise`` is the starting point of the whole clip; its conditioning
        frames are ignored.
        """
        n_cond = cond.shape[1]

        def velocity_fn(x, t):
            x = torch.cat([cond, x[:, n_cond:]], dim=1)
            velocity = self.velocity(x, n_cond, t)
            return torch.cat([torch.zeros_like(velocity[:, :n_cond]), velocity[:, n_cond:]], dim=1)

        out = self.flow.sample(velocity_fn, tuple(noise.shape), n_steps=n_steps, sampler=sampler, noise=noise,
                               dtype=noise.dtype)
        return torch.cat([cond, out[:, n_cond:]], dim=1)

