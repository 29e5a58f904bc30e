"""Qwen2-VL and Qwen2.5-VL behind the causal-VLM protocol: 3-D multimodal rotary positions.

These models rotate queries and keys by three position channels (time,
height, width; M-RoPE): text tokens advance all three together, an image's
tokens take their grid coordinates, and text after an image continues from
the largest position plus one. 1-D positions from the attention mask run
without an error but are wrong for every token after an image. The adapter
computes the prefill's (3, B, T) positions with the model's own
``get_rope_index`` (keywords only: Qwen2.5 puts another argument before the
mask), keeps each row's next position in the decoding state and passes
(3, B, 1) positions on every step. It never relies on the ``rope_deltas``
the model stores on itself during ``generate``: that state is shared by
every call, and passing positions leaves it untouched, so VISTA's text-only
forward cannot corrupt a later ``generate``.

An image is found only as ``<|image_pad|>`` right after ``<|vision_start|>``,
so prompts must hold the whole ``<|vision_start|><|image_pad|><|vision_end|>``
triple, and VISTA's negative context cuts the whole triple. Lavender reads
the attention to the merged patch grid, ``(H' / 28, W' / 28)`` for the real
checkpoints: it varies with the image, so the images of a caption batch must
give one grid; pixel rows are packed across images, so the caption batch
keeps them per sample and the forward packs them again.
"""

import functools
import sys

import torch

from ._backbone import HFLlavaAdapter

__all__ = ["HFQwen2VLAdapter"]


class HFQwen2VLAdapter(HFLlavaAdapter):
    """A Hugging Face ``Qwen2VLForConditionalGeneration`` or ``Qwen2_5_VLForConditionalGeneration``.

    Parameters are those of :class:`HFLlavaAdapter`; prompts hold the
    image as ``<|vision_start|><|image_pad|><|vision_end|>``.

    Examples
    --------
    >>> from skicml.vlm import as_backbone
    >>> from skicml.vlm._tiny_families import tiny_random_vlm
    >>> type(as_backbone(*tiny_random_vlm("qwen2_vl"))).__name__
    'HFQwen2VLAdapter'
    """

    families = frozenset({"qwen2_vl", "qwen2_5_vl"})

    def __init__(self, model, processor, image_token=None):
        super().__init__(model, processor, image_token)
        self._grid = None

    def with_model(self, model):
        other = super().with_model(model)
        other._grid = self._grid
        return other

    @property
    def _vision_tokens(self):
        config = self._config
        return tuple(self.tokenizer.convert_ids_to_tokens(int(getattr(config, name)))
                     for name in ("vision_start_token_id", "vision_end_token_id"))

    @property
    def _placeholder(self):
        start, end = self._vision_tokens
        return start + self.image_token + end

    # -- positions -----------------------------------------------------
    def rope_index(self, input_ids, attention_mask, image_grid_thw=None):
        """The (3, B, T) multimodal positions of a prompt batch and each row's next position (B,)."""
        positions, _ = self.core.get_rope_index(input_ids=input_ids, image_grid_thw=image_grid_thw,
                                                video_grid_thw=None, attention_mask=attention_mask)
        real = attention_mask.bool()[None].expand_as(positions)
        next_position = positions.masked_fill(~real, -1).amax(dim=(0, 2)) + 1
        return positions, next_position

    def _positions(self, inputs, state):
        mask = inputs["attention_mask"]
        if state is None:
            return self.rope_index(inputs["input_ids"], mask, inputs.get("image_grid_thw"))
        steps = mask.long().cumsum(-1) - 1
        positions = (state["next_position"][:, None] + steps)[None].expand(3, -1, -1)
        return positions, positions[0, :, -1] + 1

    # -- Lavender ------------------------------------------------------
    @property
    def image_grid(self):
        if self._grid is None:
            raise ValueError(f"{self.family}'s image grid depends on the image size: it is set by the first "
                             "caption_batch (LavenderTuner calls it before reading the grid).")
        return self._grid

    def _check_caption_images(self, images):
        pass  # the grid follows the image's aspect ratio; caption_batch checks that the batch shares one grid

    def _check_image_count(self, row, found):
        pass  # checked against image_grid_thw in _caption_images

    def _caption_images(self, batch):
        grids = torch.as_tensor(self._stacked(batch["image_grid_thw"]))
        if not bool((grids == grids[0]).all()):
            raise ValueError(f"the images give {self.family} grids {grids.tolist()} (time, height, width patches): "
                             "LavenderTuner compares maps of one grid; pass images of one size.")
        merge = int(self._config.vision_config.spatial_merge_size)
        t, h, w = (int(v) for v in grids[0])
        if t != 1:
            raise ValueError(f"an image of {self.family} spans {t} time steps; LavenderTuner reads still images.")
        self._grid = (h // merge, w // merge)
        pixels = torch.as_tensor(self._stacked(batch["pixel_values"]))
        # Packed rows of all images (sum of t*h*w, dim): one block of t*h*w rows a sample, so the tuner can slice.
        return {"pixel_values": pixels.reshape(len(grids), t * h * w, -1), "image_grid_thw": grids}

    def _teacher_inputs(self, inputs):
        ids, mask, grids = inputs["input_ids"], inputs["attention_mask"], inputs["image_grid_thw"]
        positions, _ = self.rope_index(ids, mask, grids)
        pixels = inputs["pixel_values"].flatten(0, 1).to(self.lm_head.weight.dtype)
        return {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "pixel_values": pixels,
                "image_grid_thw": grids}

    def _image_keys(self, inputs):
        ids = inputs["input_ids"]
        n = self.image_grid[0] * self.image_grid[1]
        image = ids == self.image_token_id
        if not bool((image.sum(1) == n).all()):
            raise ValueError(f"every row must hold {n} image tokens (one image of {self.image_grid} merged "
                             f"patches); got {image.sum(1).tolist()}.")
        return image.nonzero()[:, 1].reshape(len(ids), n)  # raster order of the merged grid

    def _rotation(self, attention):
        rotate = getattr(sys.modules[type(attention).__module__], "apply_multimodal_rotary_pos_emb", None)
        section = (getattr(attention, "rope_scaling", None) or {}).get("mrope_section")
        if rotate is None or section is None:
            return None
        return functools.partial(_mrope, rotate, section)


def _mrope(rotate, section, q, k, cos, sin):
    return rotate(q, k, cos, sin, section)
