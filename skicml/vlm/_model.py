"""TinyVLM: a small decoder-only vision-language model in plain torch.

A convolutional stem turns an image into a grid of patch tokens; a causal
Llama-style decoder reads them before the text, LLaVA's layout at toy scale:

    [image tokens] [<bos> prompt words] [caption words ... <eos>]

Each decoder layer keeps its MLP as a submodule (``layer.mlp``) and returns
the residual stream, so that hooks can read and steer both, as VISTA does on
LLaVA. Prompts of different lengths in a batch are left-padded; positions
skip the padding and a key mask hides it, with a KV cache for decoding.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..nn import RMSNorm
from ..nn.rope import apply_rotary

__all__ = ["TinyVLM"]


class PatchStem(nn.Module):
    """Image (B, S, S, 3) in [0, 1] to patch tokens (B, (S / patch_size)**2, hidden_size)."""

    def __init__(self, hidden_size, patch_size, image_size):
        super().__init__()
        if image_size % patch_size or patch_size % 2:
            raise ValueError(f"image_size={image_size} must be a multiple of patch_size={patch_size}, "
                             "an even number.")
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.patch = nn.Conv2d(64, hidden_size, patch_size // 2, stride=patch_size // 2)
        self.position = nn.Parameter(torch.zeros((image_size // patch_size) ** 2, hidden_size))
        nn.init.normal_(self.position, std=0.02)

    def forward(self, images):
        x = images.permute(0, 3, 1, 2)
        x = F.gelu(self.conv2(F.gelu(self.conv1(x))))
        return self.patch(x).flatten(2).transpose(1, 2) + self.position


class GatedMLP(nn.Module):
    def __init__(self, hidden_size, inner):
        super().__init__()
        self.gate = nn.Linear(hidden_size, inner, bias=False)
        self.up = nn.Linear(hidden_size, inner, bias=False)
        self.down = nn.Linear(inner, hidden_size, bias=False)

    def forward(self, x):
        return self.down(F.gelu(self.gate(x)) * self.up(x))


class DecoderLayer(nn.Module):
    """Pre-norm rotary self-attention and gated MLP, with a KV cache."""

    def __init__(self, hidden_size, head_dim, mlp_ratio):
        super().__init__()
        self.n_heads = hidden_size // head_dim
        self.attn_norm = RMSNorm(hidden_size)
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size, bias=False)
        self.out = nn.Linear(hidden_size, hidden_size, bias=False)
        self.mlp_norm = RMSNorm(hidden_size)
        self.mlp = GatedMLP(hidden_size, mlp_ratio * hidden_size)

    def forward(self, x, angles, mask, past=None, need_weights=False):
        """``x`` (B, T, d); ``angles`` (B, 1, T, head_dim); ``mask`` (B, 1, T, T_past + T), True attends.

        Returns the residual stream (B, T, d) and this layer's keys and
        values; with ``need_weights``, also the attention probabilities
        (B, heads, T, T_past + T), computed eagerly so that gradients flow
        through them (Lavender aligns them).
        """
        q, k, v = self.qkv(self.attn_norm(x)).unflatten(-1, (3, self.n_heads, -1)).permute(2, 0, 3, 1, 4)
        q, k = apply_rotary(q, angles), apply_rotary(k, angles)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        weights = None
        if need_weights:
            scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
            weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
            attended = weights @ v
        else:
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.out(attended.transpose(1, 2).flatten(-2))
        x = x + self.mlp(self.mlp_norm(x))
        return (x, (k, v), weights) if need_weights else (x, (k, v))


class TinyVLM(nn.Module):
    """A small causal vision-language model: patch stem, decoder, LM head.

    Parameters
    ----------
    vocabulary : sequence of str
        The word vocabulary; its first four entries are ``<pad>``, ``<bos>``,
        ``<eos>`` and ``<unk>``.
    image_size : int, default=48
        Side of the square RGB images it reads.
    patch_size : int, default=16
        Side of an image patch; the image gives ``(image_size / patch_size)**2``
        tokens (9 by default: one a cell of a 3 x 3 scene grid).
    hidden_size : int, default=128
    num_layers : int, default=6
    head_dim : int, default=32
    mlp_ratio : int, default=4

    Examples
    --------
    >>> import torch
    >>> from skicml.vlm import TinyVLM
    >>> model = TinyVLM(["<pad>", "<bos>", "<eos>", "<unk>", "a", "red", "circle"], hidden_size=32,
    ...                 num_layers=2, head_dim=16)
    >>> hidden, cache = model(torch.tensor([[1, 4, 5]]), images=torch.rand(1, 48, 48, 3))
    >>> hidden.shape  # 9 image tokens, then 3 words
    torch.Size([1, 12, 32])
    """

    def __init__(self, vocabulary, image_size=48, patch_size=16, hidden_size=128, num_layers=6, head_dim=32,
                 mlp_ratio=4):
        super().__init__()
        vocabulary = list(vocabulary)
        if vocabulary[:4] != ["<pad>", "<bos>", "<eos>", "<unk>"]:
            raise ValueError(f"vocabulary must start with <pad>, <bos>, <eos>, <unk>; got {vocabulary[:4]}.")
        if hidden_size % head_dim or head_dim % 2:
            raise ValueError(f"hidden_size={hidden_size} must be a multiple of head_dim={head_dim}, an even number.")
        self.vocabulary = vocabulary
        self.config = dict(image_size=image_size, patch_size=patch_size, hidden_size=hidden_size,
                           num_layers=num_layers, head_dim=head_dim, mlp_ratio=mlp_ratio)
        self.image_size = image_size
        self.n_image_tokens = (image_size // patch_size) ** 2
        self.stem = PatchStem(hidden_size, patch_size, image_size)
        self.embed = nn.Embedding(len(vocabulary), hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(hidden_size, head_dim, mlp_ratio) for _ in range(num_layers))
        self.norm = RMSNorm(hidden_size)
        self.lm_head = nn.Linear(hidden_size, len(vocabulary), bias=False)
        frequencies = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim)
        self.register_buffer("frequencies", frequencies, persistent=False)
        self.apply(self._init)

    @staticmethod
    def _init(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def embed_inputs(self, token_ids, images=None, token_mask=None):
        """Input embeddings (B, T, d) and key mask (B, T): image tokens (if any) first, then the words."""
        embeds = self.embed(token_ids)
        mask = torch.ones_like(token_ids, dtype=torch.bool) if token_mask is None else token_mask.bool()
        if images is not None:
            patches = self.stem(images.to(embeds.dtype))
            embeds = torch.cat([patches, embeds], dim=1)
            mask = torch.cat([mask.new_ones(patches.shape[:2]), mask], dim=1)
        return embeds, mask

    def forward(self, token_ids, images=None, token_mask=None, cache=None, attention_layers=None):
        """Final-normed hidden states (B, T, d) and the updated cache.

        ``token_mask`` (B, T) marks real tokens (False on left padding);
        ``cache`` is what an earlier call returned: the keys and values of
        every layer, the key mask and each row's next position. With
        ``attention_layers`` (layer indices), a third output holds those
        layers' attention probabilities, (len(attention_layers), B, heads,
        T, T_past + T), computed eagerly and differentiable.
        """
        embeds, new_mask = self.embed_inputs(token_ids, images, token_mask)
        if cache is None:
            past, key_mask = [None] * len(self.layers), new_mask
            positions = new_mask.long().cumsum(1) - 1
        else:
            past, key_mask = cache["layers"], torch.cat([cache["key_mask"], new_mask], dim=1)
            positions = cache["next_position"][:, None] + new_mask.long().cumsum(1) - 1
        positions = positions.clamp(min=0)
        n_new, n_keys = embeds.shape[1], key_mask.shape[1]
        causal = torch.ones(n_new, n_keys, dtype=torch.bool, device=embeds.device).tril(n_keys - n_new)
        mask = (causal[None] & key_mask[:, None, :])[:, None]
        # A padded query row would attend nothing; let it see itself so softmax stays finite.
        rows = torch.arange(n_new, device=embeds.device)[:, None] + (n_keys - n_new)
        mask = mask | (rows == torch.arange(n_keys, device=embeds.device))[None, None]
        angles = (positions[..., None].to(self.frequencies.dtype) * self.frequencies).repeat_interleave(2, -1)[:, None]
        wanted = set() if attention_layers is None else {int(i) for i in attention_layers}
        x, layers, weights = embeds, [], {}
        for index, (layer, layer_past) in enumerate(zip(self.layers, past)):
            if index in wanted:
                x, kv, weights[index] = layer(x, angles, mask, layer_past, need_weights=True)
            else:
                x, kv = layer(x, angles, mask, layer_past)
            layers.append(kv)
        next_position = positions[:, -1] + 1
        cache = {"layers": layers, "key_mask": key_mask, "next_position": next_position}
        if attention_layers is None:
            return self.norm(x), cache
        return self.norm(x), cache, torch.stack([weights[int(i)] for i in attention_layers])

    def logits(self, hidden):
        return self.lm_head(hidden)
