"""LLaVA-NeXT and LLaVA-OneVision behind the causal-VLM protocol: any-resolution tiling.

Each image becomes a variable number of tokens: first the **base** image
(the whole image squashed to the vision tower's square, ``P x P`` patches in
raster order), then the high-resolution canvas of the tiles, unpadded to the
image's aspect ratio, row by row with one ``image_newline`` token after each
row (OneVision shrinks a large canvas, ``anyres_max_9``). Decoding is the
LLaVA scheme (1-D positions from the mask, the processor's ``image_sizes``
and ``batch_num_images`` carried to the model), which reproduces
``model.generate``. Lavender reads the attention to the base block, the
one grid every image has at a constant size; it never flattens the whole
block, which would mix the base grid, the canvas and the newlines.
"""

import torch

from ._backbone import HFLlavaAdapter

__all__ = ["HFLlavaNextAdapter"]


class HFLlavaNextAdapter(HFLlavaAdapter):
    """A Hugging Face ``LlavaNextForConditionalGeneration`` or ``LlavaOnevisionForConditionalGeneration``.

    Parameters are those of :class:`HFLlavaAdapter`. ``image_grid`` is the
    base block's ``P x P`` grid (``P`` = the vision tower's image size over
    its patch size); images of any shape are accepted, since the base block
    covers the whole image, squashed.

    Examples
    --------
    >>> from skicml.vlm import as_backbone
    >>> from skicml.vlm._tiny_families import tiny_random_vlm
    >>> as_backbone(*tiny_random_vlm("llava_next")).image_grid
    (4, 4)
    """

    families = frozenset({"llava_next", "llava_onevision"})

    def _check_caption_images(self, images):
        pass  # the base block is the whole image squashed to a square: nothing is cropped away

    def _check_image_count(self, row, found):
        side = self.image_grid[0]
        if found < side * side:
            raise ValueError(f"row {row} holds {found} image tokens, fewer than the {side} x {side} of the base "
                             f"block of {self.family}: the processor and the model's vision config disagree.")

    def _caption_images(self, batch):
        images = {"pixel_values": self._stacked(batch["pixel_values"]),
                  "image_sizes": self._stacked(batch["image_sizes"])}
        if "batch_num_images" in batch:
            images["batch_num_images"] = self._stacked(batch["batch_num_images"])
        return images

    def _teacher_inputs(self, inputs):
        kwargs = super()._teacher_inputs(inputs)
        kwargs.update({key: inputs[key] for key in ("image_sizes", "batch_num_images") if key in inputs})
        return kwargs

    def _image_keys(self, inputs):
        ids = inputs["input_ids"]
        n_base = self.image_grid[0] * self.image_grid[1]
        keys = []
        for row in ids == self.image_token_id:
            positions = row.nonzero()[:, 0]
            if len(positions) < n_base:
                raise ValueError(f"a row holds {len(positions)} image tokens, fewer than the base block's {n_base}.")
            keys.append(positions[:n_base])  # the base block leads the image's tokens
        return torch.stack(keys)
