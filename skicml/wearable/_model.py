"""The wearable behavior model (WBM) of Erturk et al. (ICML 2025), in plain torch.

One participant-week is a grid of ``T = 168`` hours by ``V`` behavioral
variables with NaN where nothing was recorded. The network reads it top to
bottom as:

1. per-channel z-scoring with statistics stored in the model, missing cells
   set to 0 after normalisation and a missingness mask kept beside them;
2. the hourly tokenizer ("TST"): each hour's ``V`` values and ``V`` mask bits
   go through a small MLP to one token of width ``d_model`` (optionally with
   those of the same hour a day before and after, ``day_context``);
3. the backbone: bidirectional Mamba-2 layers (the paper's winner) or a
   Transformer encoder (the alternative it was compared against);
4. mean pooling over hours to the week embedding ``r`` (with
   ``pooling="layer_mean"``, the means of the tokenizer's and of every
   backbone layer's outputs side by side);
5. for pretraining only, one of two objectives:

   - ``"infonce"`` (the paper's): a projection head to an L2-normalised
     ``z`` and a symmetric InfoNCE loss (plus an optional KoLeo
     regulariser) between two views of a week, made by mask-aware
     augmentations that only ever remove observations;
   - ``"masked"``: hours are hidden from the tokenizer (marked missing) and
     a linear head predicts their observed z-scores from the backbone's
     tokens. The error is averaged per variable first, so a nightly reading
     such as resting heart rate weighs as much as hourly steps. With
     ``visible_weight > 0`` the head also reconstructs the hours it was
     shown, which keeps every hour's own readings in its token and so in
     the mean-pooled week embedding.
"""

import torch
import torch.nn.functional as F
from torch import nn

from ..nn.mamba2 import BidirectionalMamba2Layer

__all__ = ["WearableModel", "augment_week", "hour_blocks", "info_nce_loss", "koleo_loss"]

#: Default strengths of the pretraining augmentations (spec section 2.4).
DEFAULT_AUGMENT = {
    "cutout_blocks": 2,         # hour blocks removed per view ...
    "cutout_hours": (2, 24),    # ... each this long, at most 25% of the week
    "channel_dropout": 0.1,     # probability a variable is dropped for the view
    "jitter": 0.1,              # Gaussian noise on observed z-scores
    "scale": (0.8, 1.2),        # multiplicative factor on the scalable channels
}


HOURS_PER_DAY = 24

#: The ways hourly tokens become a week embedding (see :class:`WearableModel`).
POOLINGS = ("mean", "masked_mean", "layer_mean")


class HourlyTokenizer(nn.Module):
    """One token per hour from the hour's values and missingness bits (the paper's TST).

    With ``day_context=True`` a second MLP, added to the first, reads the
    hour together with the same clock hour one day earlier and one day later
    (cells outside the week count as missing), so that night-to-night
    differences, such as an irregular sleep onset, are features of single
    tokens and survive mean pooling. The one-hour MLP stays on its own: a
    single MLP over all three hours held the weekly levels less well.
    """

    def __init__(self, n_channels, d_model, hidden=64, dropout=0.1, day_context=False):
        super().__init__()
        self.mlp = _token_mlp(2 * n_channels, hidden, d_model, dropout)
        self.context = _token_mlp(6 * n_channels, hidden, d_model, dropout) if day_context else None

    def forward(self, values, missing):
        missing = missing.to(values.dtype)
        hour = torch.cat([values, missing], dim=-1)
        tokens = self.mlp(hour)
        if self.context is not None:
            parts = [hour]
            for lag in (HOURS_PER_DAY, -HOURS_PER_DAY):
                parts += [_shift_hours(values, lag, 0.0), _shift_hours(missing, lag, 1.0)]
            tokens = tokens + self.context(torch.cat(parts, dim=-1))
        return tokens

    @property
    def day_context(self):
        return self.context is not None


def _token_mlp(width, hidden, d_model, dropout):
    return nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, d_model))


def _shift_hours(x, lag, fill):
    """``x`` of shape (batch, T, ...) moved ``lag`` hours later along T
    (earlier for a negative lag), the vacated hours set to ``fill``."""
    out = torch.full_like(x, fill)
    length = x.shape[1]
    if abs(lag) < length:
        if lag >= 0:
            out[:, lag:] = x[:, :length - lag]
        else:
            out[:, :length + lag] = x[:, -lag:]
    return out


class TransformerBackbone(nn.Module):
    """Post-norm Transformer encoder with learned absolute hour positions.

    ``forward(x, all_layers=True)`` returns the list of every layer's output.
    """

    def __init__(self, d_model, n_layers, n_heads, n_timesteps, bidirectional=True, dropout=0.1):
        super().__init__()
        self.bidirectional = bidirectional
        self.position = nn.Parameter(torch.zeros(n_timesteps, d_model))
        nn.init.normal_(self.position, std=0.02)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                d_model, n_heads, 4 * d_model, dropout, activation="gelu", batch_first=True
            )
            for _ in range(n_layers)
        )

    def forward(self, x, all_layers=False):
        length = x.shape[1]
        if length > self.position.shape[0]:
            raise ValueError(
                f"The Transformer backbone was built for weeks of at most "
                f"{self.position.shape[0]} time steps; got {length}."
            )
        x = x + self.position[:length]
        causal = None
        if not self.bidirectional:
            causal = nn.Transformer.generate_square_subsequent_mask(length, device=x.device, dtype=x.dtype)
        outputs = []
        for layer in self.layers:
            x = layer(x, src_mask=causal, is_causal=causal is not None)
            outputs.append(x)
        return outputs if all_layers else x


class Mamba2Backbone(nn.Module):
    """A stack of (bidirectional) Mamba-2 layers.

    ``forward(x, all_layers=True)`` returns the list of every layer's output.
    """

    def __init__(self, d_model, n_layers, bidirectional=True, dropout=0.1, **mixer_kwargs):
        super().__init__()
        self.layers = nn.ModuleList(
            BidirectionalMamba2Layer(d_model, bidirectional=bidirectional, dropout=dropout, **mixer_kwargs)
            for _ in range(n_layers)
        )

    def forward(self, x, all_layers=False):
        outputs = []
        for layer in self.layers:
            x = layer(x)
            outputs.append(x)
        return outputs if all_layers else x


class ProjectionHead(nn.Module):
    """``r -> 4d -> d -> p`` MLP with LayerNorm and GELU, L2-normalised output."""

    def __init__(self, embedding_dim, d_model, proj_dim, dropout=0.1):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(embedding_dim, 4 * d_model), nn.LayerNorm(4 * d_model), nn.GELU(), nn.Dropout(dropout),
            nn.Linear(4 * d_model, d_model), nn.LayerNorm(d_model), nn.GELU(), nn.Dropout(dropout),
            nn.Linear(d_model, proj_dim),
        )

    def forward(self, r):
        return F.normalize(self.mlp(r), dim=-1)


class WearableModel(nn.Module):
    """Encoder of participant-weeks, with its self-supervised pretraining loss.

    Parameters
    ----------
    n_channels : int
        Behavioral variables per hour ``V``.
    n_timesteps : int, default=168
        Hours per week (only the Transformer backbone depends on it).
    backbone : {"mamba2", "transformer"}, default="mamba2"
    bidirectional : bool, default=True
    d_model : int, default=64
    n_layers : int, default=2
    d_state, head_dim, expand, chunk_size : int
        Mamba-2 mixer sizes, see :class:`skicml.nn.Mamba2Mixer`.
    n_heads : int, default=4
        Attention heads of the Transformer backbone.
    tokenizer_hidden : int, default=64
    proj_dim : int, default=32
    dropout : float, default=0.1
    day_context : bool, default=False
        Each hour's token also reads the same hour one day before and after
        (see :class:`HourlyTokenizer`).
    pooling : {"mean", "masked_mean", "layer_mean"}, default="mean"
        ``"masked_mean"`` averages only the hours with at least one
        observation (all hours when there are none). ``"layer_mean"``
        concatenates the mean over hours of the tokenizer's output and of
        each backbone layer's output, an embedding of
        ``(n_layers + 1) * d_model`` values that keeps what the early layers
        hold and the last one has mixed away.
    temperature : float, default=0.1
    koleo_weight : float, default=0.0
    augment : dict or None
        Overrides of :data:`DEFAULT_AUGMENT`.
    objective : {"infonce", "masked"}, default="infonce"
        The pretraining loss of :meth:`forward`. ``proj_dim``,
        ``temperature``, ``koleo_weight`` and ``augment`` belong to
        ``"infonce"``; ``mask_fraction`` to ``"masked"``.
    mask_fraction : float, default=0.3
        Share of hours hidden at random by the masked objective, on top of
        two blocks of 6-24 hours.
    visible_weight : float, default=0.0
        Weight, relative to the hidden hours, of reconstructing the observed
        hours that the tokenizer was shown (masked objective only). ``0`` is
        the usual masked-prediction loss.

    Notes
    -----
    The buffers ``channel_mean``, ``channel_std`` and ``scalable_channels``
    are part of the state dict, so a checkpoint carries the normalisation
    it was trained with.
    """

    def __init__(self, n_channels, n_timesteps=168, backbone="mamba2", bidirectional=True, d_model=64,
                 n_layers=2, d_state=16, head_dim=16, expand=2, chunk_size=16, n_heads=4,
                 tokenizer_hidden=64, proj_dim=32, dropout=0.1, pooling="mean", temperature=0.1,
                 koleo_weight=0.0, augment=None, objective="infonce", mask_fraction=0.3,
                 visible_weight=0.0, day_context=False):
        super().__init__()
        if backbone not in ("mamba2", "transformer"):
            raise ValueError(f"backbone={backbone!r}; expected 'mamba2' or 'transformer'.")
        if objective not in ("infonce", "masked"):
            raise ValueError(f"objective={objective!r}; expected 'infonce' or 'masked'.")
        if not 0.0 <= mask_fraction < 1.0:
            raise ValueError(f"mask_fraction={mask_fraction!r}; expected a share of hours in [0, 1).")
        if not visible_weight >= 0.0:
            raise ValueError(f"visible_weight={visible_weight!r}; expected a weight >= 0.")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling={pooling!r}; expected one of {', '.join(map(repr, POOLINGS))}.")
        self.pooling = pooling
        #: Width of :meth:`embed`'s output.
        self.embedding_dim = d_model * (n_layers + 1 if pooling == "layer_mean" else 1)
        self.objective = objective
        self.mask_fraction = mask_fraction
        self.visible_weight = float(visible_weight)
        self.temperature = temperature
        self.koleo_weight = koleo_weight
        self.augment = {**DEFAULT_AUGMENT, **(augment or {})}
        self.register_buffer("channel_mean", torch.zeros(n_channels))
        self.register_buffer("channel_std", torch.ones(n_channels))
        self.register_buffer("scalable_channels", torch.zeros(n_channels, dtype=torch.bool))
        self.tokenizer = HourlyTokenizer(n_channels, d_model, tokenizer_hidden, dropout, day_context)
        if backbone == "mamba2":
            self.backbone = Mamba2Backbone(
                d_model, n_layers, bidirectional, dropout,
                d_state=d_state, head_dim=head_dim, expand=expand, chunk_size=chunk_size,
            )
        else:
            self.backbone = TransformerBackbone(d_model, n_layers, n_heads, n_timesteps, bidirectional, dropout)
        if objective == "infonce":
            self.head = ProjectionHead(self.embedding_dim, d_model, proj_dim, dropout)
        else:
            self.reconstruction = nn.Linear(d_model, n_channels)

    def normalize(self, weeks):
        """Z-scores of raw weeks with missing cells at 0, and the missingness mask."""
        missing = torch.isnan(weeks)
        z = (weeks - self.channel_mean) / self.channel_std
        # Zeroing after normalisation makes the output blind to whatever a
        # missing cell holds; clipping keeps one wild reading from dominating.
        return torch.where(missing, torch.zeros_like(z), z.clamp(-20, 20)), missing

    def embed(self, weeks):
        """Week embeddings ``r`` of shape ``(batch, embedding_dim)`` from raw weeks with NaN."""
        z, missing = self.normalize(weeks)
        tokens = self.tokenizer(z, missing)
        if self.pooling == "layer_mean":
            layers = [tokens, *self.backbone(tokens, all_layers=True)]
            return torch.cat([layer.mean(1) for layer in layers], dim=-1)
        tokens = self.backbone(tokens)
        if self.pooling == "masked_mean":
            observed = (~missing.all(dim=-1)).to(tokens.dtype).unsqueeze(-1)
            observed = torch.where(observed.sum(1, keepdim=True) > 0, observed, torch.ones_like(observed))
            return (tokens * observed).sum(1) / observed.sum(1)
        return tokens.mean(1)

    def forward(self, weeks, partner=None):
        """The pretraining loss of a batch of raw weeks.

        For ``"infonce"``: two augmented views of each week, or of each week
        and ``partner`` (another week of the same person), must find each
        other. For ``"masked"``: the reconstruction error of hidden hours
        (``partner`` is not used).
        """
        if self.objective == "masked":
            return self.masked_reconstruction_loss(weeks)
        view1 = augment_week(weeks, self.augment, self.channel_std, self.scalable_channels)
        view2 = augment_week(
            weeks if partner is None else partner, self.augment, self.channel_std, self.scalable_channels
        )
        # One pass over both views: half the calls, twice the batch.
        z1, z2 = self.head(self.embed(torch.cat([view1, view2]))).chunk(2)
        loss = info_nce_loss(z1, z2, self.temperature)
        if self.koleo_weight:
            loss = loss + self.koleo_weight * 0.5 * (koleo_loss(z1) + koleo_loss(z2))
        return loss

    def masked_reconstruction_loss(self, weeks):
        """Mean squared error of the hidden observed z-scores, averaged per
        variable, plus ``visible_weight`` times the same for the shown ones."""
        z, missing = self.normalize(weeks)
        batch, length, _ = weeks.shape
        hide = torch.rand(batch, length, 1, device=weeks.device) < self.mask_fraction
        # Blocks of up to a day (a seventh of the week) hide whole nights and
        # days, which neighbouring hours cannot fill in.
        longest = max(1, min(24, length // 7))
        hide |= hour_blocks(batch, length, 2, min(6, longest), longest, weeks.device)
        unseen = missing | hide
        tokens = self.backbone(self.tokenizer(torch.where(unseen, torch.zeros_like(z), z), unseen))
        squared = (self.reconstruction(tokens) - z) ** 2
        loss = _per_variable_mean(squared, hide & ~missing)
        if self.visible_weight:
            loss = loss + self.visible_weight * _per_variable_mean(squared, ~unseen)
        return loss


def _per_variable_mean(squared, cells):
    """Mean of ``squared`` over ``cells`` for each variable with any, then over variables."""
    cells = cells.to(squared.dtype)
    counts = cells.sum((0, 1))
    present = counts > 0
    if not present.any():
        return (squared * cells).sum()  # nothing to reconstruct: zero, with a graph
    return ((squared * cells).sum((0, 1))[present] / counts[present]).mean()


def augment_week(weeks, strengths, channel_std, scalable_channels):
    """A random view of raw weeks ``(batch, T, V)``: removes observations, never adds any.

    Hour blocks and whole variables become NaN, observed values get
    multiplicative scaling (``scalable_channels`` only) and Gaussian jitter of
    ``jitter * channel_std``, i.e. ``jitter`` on the z-score scale. This is
    the view :class:`WearableModel` contrasts; a subclass with another
    self-supervised loss draws its views the same way.

    Parameters
    ----------
    weeks : torch.Tensor of shape (batch, T, V)
        Raw hourly values, NaN where missing.
    strengths : dict
        The keys of :data:`DEFAULT_AUGMENT` (``WearableModel.augment``).
    channel_std : torch.Tensor of shape (V,)
        Per-variable standard deviations (``WearableModel.channel_std``).
    scalable_channels : torch.Tensor of shape (V,), dtype bool
        Variables that get the multiplicative scaling
        (``WearableModel.scalable_channels``).

    Returns
    -------
    torch.Tensor of shape (batch, T, V)
        The view, with at least the NaN of ``weeks``; random draws come from
        torch's global generator.
    """
    batch, length, n_channels = weeks.shape
    device, dtype = weeks.device, weeks.dtype
    drop = torch.zeros(batch, length, n_channels, dtype=torch.bool, device=device)

    lo, hi = strengths["cutout_hours"]
    n_blocks = int(strengths["cutout_blocks"])
    if n_blocks and length >= 4:
        # Blocks never cover more than a quarter of the week together.
        hi = max(1, min(hi, length // (4 * n_blocks)))
        drop |= hour_blocks(batch, length, n_blocks, min(lo, hi), hi, device)

    p_channel = float(strengths["channel_dropout"])
    if p_channel and n_channels > 1:
        drop |= (torch.rand(batch, 1, n_channels, device=device) < p_channel)

    out = weeks
    low, high = strengths["scale"]
    if scalable_channels.any() and (low, high) != (1.0, 1.0):
        factor = torch.empty(batch, 1, n_channels, device=device, dtype=dtype).uniform_(low, high)
        out = out * torch.where(scalable_channels, factor, torch.ones_like(factor))
    sigma = float(strengths["jitter"])
    if sigma:
        out = out + sigma * channel_std * torch.randn_like(out)
    return torch.where(drop, torch.full_like(out, float("nan")), out)


def hour_blocks(batch, length, n_blocks, shortest, longest, device=None):
    """Mask ``(batch, length, 1)`` of ``n_blocks`` random runs of hours per
    week, each ``shortest`` to ``longest`` hours long."""
    mask = torch.zeros(batch, length, 1, dtype=torch.bool, device=device)
    hours = torch.arange(length, device=device)
    for _ in range(n_blocks):
        size = torch.randint(shortest, longest + 1, (batch, 1), device=device)
        start = (torch.rand(batch, 1, device=device) * (length - size + 1)).long()
        mask |= ((hours >= start) & (hours < start + size)).unsqueeze(-1)
    return mask


def info_nce_loss(z1, z2, temperature=0.1):
    """Symmetric InfoNCE between matching rows of two L2-normalised batches.

    Each row of ``z1`` must pick its partner among the ``N`` rows of ``z2``
    and vice versa; random embeddings give about ``log N``.
    """
    logits = z1 @ z2.T / temperature
    target = torch.arange(len(z1), device=z1.device)
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))


def koleo_loss(z, eps=1e-8):
    """Kozachenko-Leonenko entropy regulariser: ``-mean log(nearest-neighbour distance)``."""
    if len(z) < 2:
        return z.sum() * 0.0
    distances = torch.cdist(z, z)
    distances = distances + torch.eye(len(z), device=z.device, dtype=z.dtype) * 1e6
    return -torch.log(distances.min(dim=1).values + eps).mean()
