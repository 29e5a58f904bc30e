"""Lavender's alignment of a student's text-to-image attention with a teacher's per-word maps.

The released code (``llama_finetune/.../diffag``) runs this per sample and
per word in Python dictionaries; here every step is batched:

1. :func:`attention_maps` cuts the text-to-image block out of a layer's
   attention probabilities and lays each query's image attention on the
   image grid, resized to ``R x R``;
2. :class:`Aligner`, the small convolutional network that reads the heads
   as channels and writes one map (spec 2.4, 27,681 parameters at 32 heads);
3. :func:`pool_word_maps` averages the maps of all query positions keyed to
   the same teacher word with one ``index_add``, then min-max scales them;
4. :func:`align_loss`, the mean over matched words of the per-pixel MSE.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Aligner", "align_loss", "attention_maps", "grid_maps", "keyed_words", "minmax_maps", "pool_word_maps",
           "word_hits"]

_NORMS = {
    "instance": lambda channels: nn.InstanceNorm2d(channels),
    "batch": lambda channels: nn.BatchNorm2d(channels),
    "group": lambda channels: nn.GroupNorm(1, channels),
    None: lambda channels: nn.Identity(),
}


class Aligner(nn.Module):
    """Heads of a word's attention map (N, heads, R, R) to one map (N, 1, R, R): three 3x3 convs and a 1x1.

    Parameters
    ----------
    in_channels : int
        The attention heads.
    hidden : int, default=32
    norm : {"instance", "batch", "group", None}, default="instance"
        The official default is instance norm without affine parameters.

    Examples
    --------
    >>> import torch
    >>> from skicml.vlm import Aligner
    >>> aligner = Aligner(32)
    >>> sum(p.numel() for p in aligner.parameters())  # the official 27,681
    27681
    >>> aligner(torch.rand(5, 32, 8, 8)).shape
    torch.Size([5, 1, 8, 8])
    """

    def __init__(self, in_channels, hidden=32, norm="instance"):
        super().__init__()
        self.expand = nn.Conv2d(in_channels, hidden, 3, padding=1, bias=False)
        self.norm1 = _NORMS[norm](hidden)
        self.mix = nn.Conv2d(hidden, hidden, 3, padding=1, bias=False)
        self.norm2 = _NORMS[norm](hidden)
        self.squeeze = nn.Conv2d(hidden, in_channels, 3, padding=1, bias=False)
        self.norm3 = _NORMS[norm](in_channels)
        self.project = nn.Conv2d(in_channels, 1, 1)

    def forward(self, maps):
        x = F.relu6(self.norm1(self.expand(maps)))
        x = F.relu6(self.norm2(self.mix(x)))
        x = self.norm3(self.squeeze(x))
        return self.project(F.relu6(x))


def minmax_maps(maps, eps=1e-6):
    """Min-max scale each row of ``maps`` (..., P) to [0, 1]; a constant row becomes zeros, not NaN."""
    low = maps.amin(-1, keepdim=True)
    span = maps.amax(-1, keepdim=True) - low
    return torch.where(span > eps, (maps - low) / span.clamp(min=eps), torch.zeros_like(maps))


def keyed_words(keys, keyed, teacher_ids):
    """Which text positions are keyed to which teacher word, by the token they are keyed by.

    Parameters
    ----------
    keys : Tensor of shape (B, T)
        The token each position is keyed by (the token it predicts).
    keyed : Tensor of shape (B, T), bool
        The positions that may be keyed (the target text's).
    teacher_ids : Tensor of shape (B, W) or (B, W, K)
        The token of each teacher word, or the ``K`` single tokens that
        spell it; -1 past a sample's words and spellings.

    Returns
    -------
    Tensor of shape (B, T, W), bool
        ``hits[b, t, w]``: position ``t`` of sample ``b`` is keyed to its word ``w``.
    """
    if teacher_ids.dim() == 2:
        teacher_ids = teacher_ids[..., None]
    spelled = (keys[:, :, None, None] == teacher_ids[:, None]) & (teacher_ids[:, None] >= 0)
    return spelled.any(-1) & keyed[:, :, None]


def word_hits(word_of, keyed, n_words):
    """Which text positions are keyed to which teacher word, by the word of the token they predict.

    Parameters
    ----------
    word_of : Tensor of shape (B, T)
        The teacher word each position's token belongs to, -1 for none
        (a word of several tokens has all of them).
    keyed : Tensor of shape (B, T), bool
    n_words : int

    Returns
    -------
    Tensor of shape (B, T, n_words), bool
    """
    return (word_of[:, :, None] == torch.arange(n_words, device=word_of.device)) & keyed[:, :, None]


def attention_maps(probabilities, rows, image_slice, grid, resolution):
    """The image attention of chosen query rows as maps.

    Parameters
    ----------
    probabilities : Tensor of shape (L, B, H, T, S)
        Attention probabilities of ``L`` layers.
    rows : Tensor of shape (N, 2)
        ``(sample, query position)`` pairs to read.
    image_slice : slice
        The key positions of the image tokens, ``grid[0] * grid[1]`` of them
        in raster order.
    grid : tuple of int
        The image tokens' grid, (rows, columns).
    resolution : int
        Side of the output maps; bilinear resize from the grid.

    Returns
    -------
    Tensor of shape (N, L, H, resolution, resolution)
    """
    # Two advanced indices split by a slice put their dimension first: (N, L, H, n_image), row-major in N.
    return grid_maps(probabilities[:, rows[:, 0], :, rows[:, 1], image_slice], grid, resolution)


def grid_maps(attention, grid, resolution):
    """Image attention (N, L, H, rows * columns) laid on the image grid and resized: (N, L, H, R, R).

    Bilinear resize from the grid (raster order, row 0 at the top).
    """
    n, n_layers, n_heads = attention.shape[:3]
    picked = attention.reshape(-1, n_heads, *grid)
    if tuple(grid) != (resolution, resolution):
        picked = F.interpolate(picked, size=(resolution, resolution), mode="bilinear", align_corners=False)
    return picked.reshape(n, n_layers, n_heads, resolution, resolution)


def pool_word_maps(maps, word_index, n_samples, n_words):
    """Mean map of every (sample, word) over its positions, min-max scaled, and the positions' count.

    Parameters
    ----------
    maps : Tensor of shape (N, P)
        One flattened map per keyed position.
    word_index : Tensor of shape (N,)
        ``sample * n_words + word`` of each position.
    n_samples, n_words : int

    Returns
    -------
    pooled : Tensor of shape (n_samples, n_words, P)
    counts : Tensor of shape (n_samples, n_words)
    """
    sums = maps.new_zeros(n_samples * n_words, maps.shape[-1]).index_add(0, word_index, maps)
    counts = maps.new_zeros(n_samples * n_words).index_add(0, word_index, maps.new_ones(len(word_index)))
    mean = sums / counts.clamp(min=1)[:, None]
    return minmax_maps(mean).reshape(n_samples, n_words, -1), counts.reshape(n_samples, n_words)


def align_loss(student, teacher, matched):
    """Mean over matched words of the per-pixel squared error between student and teacher maps.

    Parameters
    ----------
    student, teacher : Tensor of shape (B, W, P)
        Per-word maps in [0, 1].
    matched : Tensor of shape (B, W), bool
        The words to score.

    Returns
    -------
    loss : Tensor (scalar)
        Zero, with a zero gradient, when nothing is matched.
    n_matched : int
    """
    errors = (student - teacher).pow(2).mean(-1)
    n_matched = int(matched.sum())
    return (errors * matched).sum() / max(n_matched, 1), n_matched
