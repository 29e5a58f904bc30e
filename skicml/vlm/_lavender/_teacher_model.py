"""The network of :class:`TinyDiffusionTeacher`: a small text-conditioned pixel-space DDPM.

Read top to bottom:

- the image is cut into ``patch x patch`` patches, each a token (plus DiT's
  fixed 2-D sine-cosine position);
- the caption is a start token and one embedding per word, no text encoder:
  a word's key is the same wherever it stands, so what a patch attends to is
  the word itself, which is what a per-word map asks about;
- each block lets the patches attend to each other, then cross-attend to the
  words (:class:`~skicml.nn.CrossAttentionBlock`, whose probabilities are the
  teacher's maps), then pass an MLP;
- the timestep conditions the self-attention and the MLP through PixArt-
  alpha's "adaLN-single": one shift/scale/gate regression from the timestep
  embedding shared by all blocks, plus a learned offset per block, a third
  of the parameters of DiT's per-block adaLN-Zero at this width;
- the output is the predicted noise (epsilon) of each patch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...nn import CrossAttentionBlock, DDPMSchedule, DiTFinalLayer, TimestepEmbedder
from ...nn.dit import SelfAttention, modulate, patchify, sincos_position_embedding_2d, unpatchify

__all__ = ["TeacherDDPM"]


class TeacherBlock(nn.Module):
    """Self-attention, cross-attention to the words, MLP; the first and last modulated by the timestep."""

    def __init__(self, dim, n_heads, mlp_ratio=4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = SelfAttention(dim, n_heads)
        self.cross = CrossAttentionBlock(dim, n_heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(approximate="tanh"), nn.Linear(hidden, dim))
        # This block's offset to the shared modulation (adaLN-single).
        self.modulation = nn.Parameter(torch.randn(6, dim) * dim ** -0.5)

    def forward(self, x, shared_modulation, words, word_padding, return_attention=False):
        shift_sa, scale_sa, gate_sa, shift_mlp, scale_mlp, gate_mlp = (
            shared_modulation + self.modulation[None]).unbind(1)
        x = x + gate_sa.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_sa, scale_sa))
        x = self.cross(x, words, word_padding, return_attention)
        x, probabilities = x if return_attention else (x, None)
        x = x + gate_mlp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp))
        return x, probabilities


class TeacherDDPM(nn.Module):
    """A text-conditioned epsilon-prediction DDPM on ``image_size`` square RGB images in [-1, 1].

    Parameters
    ----------
    vocab_size : int
        Rows of the word embedding (the tokenizer's vocabulary).
    image_size : int, default=48
    patch : int, default=6
        ``image_size / patch`` is the side of the token grid, and of the maps.
    d_model : int, default=64
    n_layers : int, default=3
    n_heads : int, default=4
    n_steps : int, default=100
        Timesteps of the linear noise schedule.
    beta_max : float, default=0.05
        Its last beta (the first is 1e-4).
    caption_dropout : float, default=0.1
        Share of training captions replaced by the start token alone, so the
        network also learns the unconditional model.
    pad_id, start_id : int, default=0, 1
        The tokenizer's padding and start-of-caption ids.

    The small API the estimator uses: :meth:`loss` (also ``forward``) for
    training, :meth:`denoise` for one noise prediction, :meth:`word_attention`
    for the cross-attention maps and :meth:`denoising_errors` for scores.
    Captions come as ``word_ids`` (B, S) padded with ``pad_id``; the start
    token is added here.
    """

    def __init__(self, vocab_size, image_size=48, patch=6, d_model=64, n_layers=3, n_heads=4, n_steps=100,
                 beta_max=0.05, caption_dropout=0.1, pad_id=0, start_id=1):
        super().__init__()
        if image_size % patch:
            raise ValueError(f"image_size={image_size} is not a multiple of patch={patch}.")
        if d_model % 4:
            raise ValueError(f"d_model={d_model} must be a multiple of 4 (the 2-D position embedding).")
        self.config = dict(vocab_size=vocab_size, image_size=image_size, patch=patch, d_model=d_model,
                           n_layers=n_layers, n_heads=n_heads, n_steps=n_steps, beta_max=beta_max,
                           caption_dropout=caption_dropout, pad_id=pad_id, start_id=start_id)
        self.grid = image_size // patch
        self.patch, self.image_size = patch, image_size
        self.caption_dropout, self.pad_id, self.start_id = caption_dropout, pad_id, start_id
        self.schedule = DDPMSchedule(n_steps, beta_start=min(1e-4, beta_max), beta_end=beta_max)
        self.patch_embed = nn.Linear(3 * patch * patch, d_model)
        self.register_buffer("position", sincos_position_embedding_2d(d_model, self.grid, self.grid)[None],
                             persistent=False)
        self.word_embed = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.word_embed.weight, std=1.0)
        self.t_embed = TimestepEmbedder(d_model, frequency_dim=64)
        self.t_modulation = nn.Sequential(nn.SiLU(), nn.Linear(d_model, 6 * d_model))
        nn.init.zeros_(self.t_modulation[-1].weight)
        nn.init.zeros_(self.t_modulation[-1].bias)
        self.blocks = nn.ModuleList(TeacherBlock(d_model, n_heads) for _ in range(n_layers))
        self.final = DiTFinalLayer(d_model, patch, 3)

    # ------------------------------------------------------------------
    def _words(self, word_ids):
        """Start token + words, embedded, and the padding mask (True = padding)."""
        start = torch.full((len(word_ids), 1), self.start_id, dtype=word_ids.dtype, device=word_ids.device)
        ids = torch.cat([start, word_ids], dim=1)
        return self.word_embed(ids), ids == self.pad_id

    def denoise(self, x_t, t, word_ids, return_attention=False):
        """The predicted noise of ``x_t`` (B, 3, H, W) at timesteps ``t`` (B,) given the caption.

        With ``return_attention=True`` also a list, one per block, of the
        cross-attention probabilities (B, n_heads, grid * grid, 1 + S): the
        first key is the start token, the others the words of ``word_ids``.
        """
        words, padding = self._words(word_ids)
        x = self.patch_embed(patchify(x_t, self.patch)) + self.position
        c = self.t_embed(t)
        shared = self.t_modulation(c).unflatten(1, (6, -1))
        maps = []
        for block in self.blocks:
            x, probabilities = block(x, shared, words, padding, return_attention)
            maps.append(probabilities)
        eps = unpatchify(self.final(x, c), self.patch, 3, (self.image_size, self.image_size))
        return (eps, maps) if return_attention else eps

    def loss(self, images, word_ids):
        """The epsilon-prediction loss of a batch at random timesteps (captions dropped at random)."""
        if self.training and self.caption_dropout > 0:
            dropped = torch.rand(len(word_ids), device=word_ids.device) < self.caption_dropout
            word_ids = word_ids.masked_fill(dropped[:, None], self.pad_id)
        t, x_t, noise = self.schedule.training_pair(images)
        return F.mse_loss(self.denoise(x_t, t, word_ids), noise)

    forward = loss

    def word_attention(self, images, word_ids, timesteps, noise, blocks=None):
        """Cross-attention of every patch to every caption position, (B, grid, grid, S).

        ``images`` (clean, in [-1, 1]) are noised to each of ``timesteps``
        with ``noise`` (len(timesteps), 3, H, W), the same for every image;
        the probabilities are averaged over heads, the ``blocks`` (all when
        None) and the timesteps. The start token's column is dropped, so
        position ``j`` is ``word_ids[:, j]``.
        """
        blocks = range(len(self.blocks)) if blocks is None else blocks
        total = 0.0
        for step, eps in zip(timesteps, noise):
            t = torch.full((len(images),), int(step), dtype=torch.long, device=images.device)
            x_t = self.schedule.add_noise(images, eps.expand_as(images), t)
            _, maps = self.denoise(x_t, t, word_ids, return_attention=True)
            total = total + torch.stack([maps[b] for b in blocks]).mean(dim=(0, 2))
        mean = total / len(timesteps)
        return mean[:, :, 1:].unflatten(1, (self.grid, self.grid))

    def denoising_errors(self, images, word_ids, timesteps, noise):
        """Mean squared noise-prediction error of each image (B,), with fixed ``noise`` per timestep."""
        errors = 0.0
        for step, eps in zip(timesteps, noise):
            t = torch.full((len(images),), int(step), dtype=torch.long, device=images.device)
            target = eps.expand_as(images)
            predicted = self.denoise(self.schedule.add_noise(images, target, t), t, word_ids)
            errors = errors + (predicted - target).pow(2).mean(dim=(1, 2, 3))
        return errors / len(timesteps)
