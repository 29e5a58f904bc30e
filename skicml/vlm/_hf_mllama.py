"""Mllama (Llama-3.2-Vision) behind the causal-VLM protocol: the image enters through cross-attention.

The prompt holds one ``<|image|>`` token, an ordinary embedding; the vision
states (``max_tiles x (P**2 + 1)`` a image: each tile's CLS, then its
patches in raster order) are read by the cross-attention layers interleaved
with the self-attention ones. Decoding passes 1-D positions and, on every
step, the last row of the prompt's ``cross_attention_mask`` (which tiles of
which image a token may read): without it a step attends to the padded tiles
too. Images are passed one list per sample; the negative context is
tokenised by the processor, which places the BOS token itself.

VISTA: a text-only forward skips the cross-attention layers altogether, so
the negative residual after one is the previous layer's (the steering
vectors carry it forward), and a cross layer's MLP output is multiplied by
``tanh(cross_attn_mlp_gate)`` and the row mask: the ``"mlp_output"`` site
steers the self-attention layers only (:attr:`mlp_steering_layers`), the
``"residual"`` site any layer. Lavender reads the cross-attention
probabilities of the caption's queries over the vision keys, placed tile by
tile on the image's canvas (rows x columns of tiles from
``aspect_ratio_ids``), the CLS keys left out, the padding cropped and the
canvas resampled to ``image_grid``.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

from ._backbone import HFLlavaAdapter

__all__ = ["HFMllamaAdapter"]


class HFMllamaAdapter(HFLlavaAdapter):
    """A Hugging Face ``MllamaForConditionalGeneration`` (Llama-3.2-Vision).

    Parameters
    ----------
    model, processor, image_token
        As for :class:`HFLlavaAdapter`; prompts hold the image as
        ``<|image|>``.
    canvas : {"aspect", "official"}, default="aspect"
        How Lavender lays a row's tiles out. ``"aspect"``: tile ``i`` at
        ``divmod(i, columns)`` of the canvas its ``aspect_ratio_ids`` name,
        each tile's CLS key dropped, the padding cropped, area-resampled to
        ``image_grid`` (the largest square canvas at its native resolution).
        ``"official"``: the official Lavender code's canvas (AstraZeneca/vlm,
        ``extend_mllama_xattn``), for comparison: each tile's keys (CLS
        included) linearly interpolated as one axis to the next square and
        folded, one tile alone, two side by side, more on a 2 x 2 grid at
        the slots the tile mask sets, resized to 32 x 32; it shears each
        tile's rows and lays 2 x 1, 1 x 3, 3 x 1 and 1 x 4 images out wrongly.

    Examples
    --------
    >>> from skicml.vlm import as_backbone
    >>> from skicml.vlm._tiny_families import tiny_random_vlm
    >>> as_backbone(*tiny_random_vlm("mllama")).cross_attention_layers
    [1, 3]
    """

    families = frozenset({"mllama"})

    def __init__(self, model, processor, image_token=None, canvas="aspect"):
        if canvas not in ("aspect", "official"):
            raise ValueError(f"canvas={canvas!r}; expected 'aspect' or 'official'.")
        super().__init__(model, processor, image_token)
        self.canvas = canvas

    def with_model(self, model):
        return type(self)(model, self.processor, self._image_token_given, self.canvas)

    #: Lavender's LoRA targets: the self-attention's and the cross-attention's query and value maps.
    default_lora_targets = ("q_proj", "v_proj")

    @property
    def cross_attention_layers(self):
        return sorted(int(i) for i in self._config.get_text_config().cross_attention_layers)

    @property
    def mlp_steering_layers(self):
        """The layers whose MLP output is the residual update as it is: the self-attention layers."""
        cross = set(self.cross_attention_layers)
        return [i for i in range(len(self.layers)) if i not in cross]

    def mlp_of(self, layer):
        if hasattr(layer, "cross_attn"):
            index = next(i for i, other in enumerate(self.layers) if other is layer)
            raise ValueError(f"layer {index} of {self.family} is a cross-attention layer: its MLP output is scaled "
                             "by tanh(cross_attn_mlp_gate) and the image row mask, so steering it there is not the "
                             f"update VISTA means. Steer at vsv_site='residual', or the self-attention layers "
                             f"{self.mlp_steering_layers}.")
        return layer.mlp

    def _processor_images(self, pictures):
        return [[picture] for picture in pictures]

    def _negative_batch(self, texts):
        return self.processor(text=texts, padding=True, return_tensors="pt")

    def _carried(self, inputs):
        mask = inputs.get("cross_attention_mask")
        return {} if mask is None else {"cross_attention_mask": mask[:, -1:]}

    def _step_inputs(self, state):
        mask = state.get("cross_attention_mask")
        return {} if mask is None else {"cross_attention_mask": mask}

    # -- Lavender: cross-attention over the tiles ------------------------
    @property
    def image_attention_layers(self):
        """The layers whose queries read the image: the cross-attention layers (Lavender's default)."""
        return self.cross_attention_layers

    @property
    def _tile_patches(self):
        vision = self._config.vision_config
        return int(vision.image_size) // int(vision.patch_size)

    @property
    def image_grid(self):
        """The grid each row's tile canvas is resampled to: the largest square canvas at its native resolution."""
        if self.canvas == "official":
            return 32, 32  # the official code's, Stable Diffusion's attention resolution
        side = self._tile_patches * math.isqrt(int(self._config.vision_config.max_num_tiles))
        return side, side

    def _check_caption_images(self, images):
        pass  # the canvas keeps the aspect ratio; its padding is cropped away before resampling

    def _check_image_count(self, row, found):
        if found != 1:
            raise ValueError(f"row {row} holds {found} {self.image_token} tokens; {self.family} captions read one "
                             "image.")

    def _expanded_end(self, text, found, offsets):
        # Not expanded (the vision states enter by cross-attention), but the processor inserts the BOS token
        # after a leading image token: the caption ends the string it tokenised.
        return max(e for _, e in offsets)

    def _caption_images(self, batch):
        from transformers.models.mllama.image_processing_mllama import (
            get_image_size_fit_to_canvas,
            get_optimal_tiled_canvas,
        )

        images = {key: self._stacked(batch[key]) for key in ("pixel_values", "aspect_ratio_ids", "aspect_ratio_mask")}
        rows = [torch.as_tensor(np.asarray(m)) for m in batch["cross_attention_mask"]]
        # Right padding as the caption rows, one more for the end token they may append; a padded position reads
        # what the row's last token reads (what generate gives each new token).
        width = max(len(m) for m in rows) + 1
        images["cross_attention_mask"] = torch.stack([torch.cat([m, m[-1:].expand((width - len(m),) + m.shape[1:])])
                                                      for m in rows])
        # Where the image lies on its canvas, in patches: the image processor's fit-to-canvas rule.
        tile = int(self._config.vision_config.image_size)
        patch = int(self._config.vision_config.patch_size)
        tiles = int(self.processor.image_processor.max_image_tiles)
        content = []
        for height, width in self._caption_sizes:
            canvas = get_optimal_tiled_canvas(height, width, tiles, tile)
            new_h, new_w = get_image_size_fit_to_canvas(height, width, canvas[0], canvas[1], tile)
            content.append((math.ceil(new_h / patch), math.ceil(new_w / patch)))
        images["image_content"] = torch.as_tensor(content, dtype=torch.long)
        return images

    def caption_batch(self, images, prompts, captions):
        self._caption_sizes = [np.asarray(image).shape[:2] for image in images]
        return super().caption_batch(images, prompts, captions)

    def _teacher_inputs(self, inputs):
        mask = inputs["attention_mask"]
        kwargs = {key: inputs[key] for key in ("input_ids", "aspect_ratio_ids", "aspect_ratio_mask",
                                               "cross_attention_mask")}
        kwargs["pixel_values"] = inputs["pixel_values"].to(self.lm_head.weight.dtype)
        kwargs["cross_attention_mask"] = kwargs["cross_attention_mask"][:, :mask.shape[1]]
        return {**kwargs, "attention_mask": mask, "position_ids": (mask.long().cumsum(-1) - 1).clamp(min=0)}

    def _attention_captures(self, inputs, attention_layers, attention_rows):
        cross = set(self.cross_attention_layers)
        captures, handles = [], []
        for index in attention_layers:
            if int(index) not in cross:
                raise ValueError(f"layer {int(index)} of {self.family} is a self-attention layer: its queries never "
                                 "see the image, which enters through the cross-attention layers "
                                 f"{sorted(cross)}; align those.")
            layout = _CanvasLayout(self, inputs)
            captures.append(_CrossAttentionCapture(attention_rows, layout))
            handles += captures[-1].attach(self.layers[int(index)].cross_attn)
        return captures, handles

    def cross_attention_probabilities(self, inputs, attention_layers, attention_rows):
        """The raw cross-attention probabilities (N, layers, heads, n_vision_keys) of the chosen queries.

        Keys are the vision states in the model's order: a tile after
        another, each its CLS and then its patches in raster order.
        """
        captures, handles = self._attention_captures(inputs, attention_layers, attention_rows)
        try:
            self.model(**self._teacher_inputs(inputs), use_cache=False, return_dict=True)
        finally:
            for handle in handles:
                handle.remove()
        return torch.stack([capture.raw for capture in captures], dim=1)


class _CanvasLayout:
    """Each row's tile canvas: (rows, columns) of tiles from its aspect-ratio id, the image's extent in patches."""

    def __init__(self, adapter, inputs):
        ratios = adapter._config.vision_config.supported_aspect_ratios
        ids = inputs["aspect_ratio_ids"][:, 0].tolist()
        if min(ids) < 1:
            raise ValueError("a caption row has no image (aspect_ratio_id 0).")
        self.tiles = [tuple(int(v) for v in ratios[i - 1]) for i in ids]
        self.content = [tuple(int(v) for v in row) for row in inputs["image_content"].tolist()]
        self.side = adapter._tile_patches
        self.grid = adapter.image_grid
        self.official = adapter.canvas == "official"
        self.tile_mask = inputs["aspect_ratio_mask"][:, 0].tolist()

    def maps(self, probabilities, sample):
        """(n, heads, rows * cols) maps on ``image_grid`` of one sample's (n, heads, n_keys) probabilities."""
        if self.official:
            return self._official(probabilities, sample)
        (rows, cols), (height, width), side = self.tiles[sample], self.content[sample], self.side
        n, heads, keys = probabilities.shape
        n_tiles = keys // (side * side + 1)
        tiles = probabilities.reshape(n, heads, n_tiles, side * side + 1)[..., 1:]  # each tile's CLS key dropped
        tiles = tiles[:, :, : rows * cols].reshape(n, heads, rows, cols, side, side)
        canvas = tiles.permute(0, 1, 2, 4, 3, 5).reshape(n, heads, rows * side, cols * side)  # tile r*cols+c at (r, c)
        canvas = canvas[:, :, :height, :width]  # the padding below and right of the image
        return F.interpolate(canvas, size=self.grid, mode="area").flatten(2)


    def _official(self, probabilities, sample):
        """The official code's canvas (``extend_mllama_xattn``), step by step, its flaws included."""
        n, heads, keys = probabilities.shape
        mask = self.tile_mask[sample]
        n_max = len(mask)
        n_tiles, grid_side = int(sum(mask)), math.isqrt(n_max)
        per_tile = keys // n_max  # CLS included
        res = math.ceil(math.sqrt(per_tile))
        tiles = probabilities.reshape(n, heads, n_max, per_tile).permute(0, 2, 1, 3).reshape(n * n_max, heads, per_tile)
        tiles = F.interpolate(tiles, size=res * res, mode="linear", align_corners=False)  # one axis: shears rows
        tiles = tiles.reshape(n, n_max, heads, res, res).transpose(1, 2)  # (n, heads, tiles, res, res)
        if n_tiles == 1:
            canvas = tiles[:, :, 0]
        else:
            if n_tiles == 2:
                if mask[0] and mask[1]:
                    shape = (res, 2 * res)
                elif mask[1] and mask[2]:
                    shape = (2 * res, res)
                else:
                    raise ValueError("the official canvas has no layout for this tile mask with 2 tiles.")
            else:
                shape = (res * grid_side, res * grid_side)
            canvas = probabilities.new_zeros(n, heads, *shape)
            for index in range(n_max):
                if mask[index]:
                    row, col = divmod(index, grid_side)
                    canvas[:, :, row * res:(row + 1) * res, col * res:(col + 1) * res] = tiles[:, :, index]
        canvas = F.interpolate(canvas, size=self.grid, mode="bilinear", align_corners=False, antialias=True)
        return canvas.flatten(2)


class _CrossAttentionCapture:
    """One cross-attention layer's probabilities of the chosen queries over the vision keys, by hooks.

    ``softmax(scaling * q_norm(q) k_norm(k)^T + mask)`` in float32, as the
    eager attention computes them (no rotary embedding; key-value heads
    repeated for grouped queries); ``raw`` keeps them over all keys,
    ``probabilities`` on each row's canvas.
    """

    def __init__(self, rows, layout):
        self.rows = rows
        self.layout = layout
        self.projected = {}
        self.raw = self.probabilities = None

    def attach(self, attention):
        def keep(name):
            def hook(module, args, output):
                self.projected[name] = output
            return hook

        return [attention.q_proj.register_forward_hook(keep("q")), attention.k_proj.register_forward_hook(keep("k")),
                attention.register_forward_hook(self._read, with_kwargs=True)]

    def _read(self, module, args, kwargs, output):
        rows, head_dim = self.rows, module.head_dim
        q, k = self.projected.pop("q"), self.projected.pop("k")
        batch = q.shape[0]
        q = module.q_norm(q.view(batch, q.shape[1], -1, head_dim).transpose(1, 2))
        # The vision states come a tile a row, (B * tiles, P**2 + 1, d): the module views them as (B, keys, d).
        k = module.k_norm(k.reshape(batch, -1, k.shape[-1] // head_dim, head_dim).transpose(1, 2))
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        chosen = q[rows[:, 0], :, rows[:, 1]].float()  # (N, heads, head_dim)
        scores = torch.einsum("nhd,nhkd->nhk", chosen, k[rows[:, 0]].float()) * float(module.scaling)
        mask = kwargs.get("attention_mask")
        if mask is not None:  # (B, 1, T, keys), additive; rows before the image are left unmasked by the model
            scores = scores + mask[rows[:, 0], 0, rows[:, 1]].float()[:, None]
        self.raw = scores.softmax(-1)
        maps = torch.empty(len(rows), self.raw.shape[1], self.layout.grid[0] * self.layout.grid[1],
                           dtype=self.raw.dtype, device=self.raw.device)
        for sample in rows[:, 0].unique().tolist():
            at = rows[:, 0] == sample
            maps[at] = self.layout.maps(self.raw[at], sample)
        self.probabilities = maps
