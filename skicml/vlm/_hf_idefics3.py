"""Idefics3 and SmolVLM behind the causal-VLM protocol: image splitting, a language model named text_model.

The processor resizes each image, cuts it into rows x columns crops
(``<row_r_col_c>`` tokens before each crop's block) and appends the whole
image squashed to one crop, the **global** image (``<global-img>``); each
crop becomes ``L = (image_size / patch)**2 / scale_factor**2`` image tokens,
a ``g x g`` raster grid after the pixel shuffle (``g = sqrt(L)``). The
language model is ``model.model.text_model``, and images are passed one list
per sample. Decoding is the LLaVA scheme (1-D positions, the pixels and
their ``pixel_attention_mask`` at the prefill only), which reproduces
``model.generate``. Lavender reads the attention to the global block, the
last ``L`` image tokens of each row: the one grid that covers the whole image
at a constant size.
"""

import numpy as np
import torch

from ._backbone import HFLlavaAdapter

__all__ = ["HFIdefics3Adapter"]


class HFIdefics3Adapter(HFLlavaAdapter):
    """A Hugging Face ``Idefics3ForConditionalGeneration`` or ``SmolVLMForConditionalGeneration``.

    Parameters are those of :class:`HFLlavaAdapter`. ``image_grid`` is the
    global image's ``g x g`` grid.

    Examples
    --------
    >>> from skicml.vlm import as_backbone
    >>> from skicml.vlm._tiny_families import tiny_random_vlm
    >>> as_backbone(*tiny_random_vlm("idefics3")).image_grid
    (2, 2)
    """

    families = frozenset({"idefics3", "smolvlm"})

    @staticmethod
    def _core_model(model):
        core = getattr(model, "model", None)
        if core is None or not hasattr(core, "text_model"):
            raise ValueError(f"{type(model).__name__} has no model.model.text_model: HFIdefics3Adapter needs the "
                             "transformers >= 4.52 layout of Idefics3 and SmolVLM.")
        return core

    def _processor_images(self, pictures):
        return [[picture] for picture in pictures]

    def _negative_batch(self, texts):
        return self.processor(text=texts, padding=True, return_tensors="pt")

    @property
    def _tokens_per_crop(self):
        vision = self._config.vision_config
        side = int(vision.image_size) // int(vision.patch_size)
        return (side // int(self._config.scale_factor)) ** 2

    @property
    def image_grid(self):
        vision = self._config.vision_config
        side = int(vision.image_size) // int(vision.patch_size) // int(self._config.scale_factor)
        return side, side

    def _check_caption_images(self, images):
        pass  # the global image is the whole image squashed to a square

    def _check_image_count(self, row, found):
        n = self._tokens_per_crop
        if found < n or found % n:
            raise ValueError(f"row {row} holds {found} image tokens, not a positive multiple of the {n} tokens a "
                             f"crop of {self.family} takes.")

    def _expanded_end(self, text, found, offsets):
        # The expansion adds crop, row and global tags around the image tokens; the caption ends the string.
        return max(e for _, e in offsets)

    def _caption_images(self, batch):
        pixels = [torch.as_tensor(np.asarray(p)) for p in batch["pixel_values"]]
        masks = [torch.as_tensor(np.asarray(m)) for m in batch["pixel_attention_mask"]]
        n = max(len(p) for p in pixels)
        # Samples with fewer crops are padded with all-zero crops, which the model drops (as the processor does).

        def pad(t):
            return torch.cat([t, t.new_zeros((n - len(t),) + tuple(t.shape[1:]))])

        return {"pixel_values": torch.stack([pad(p) for p in pixels]),
                "pixel_attention_mask": torch.stack([pad(m) for m in masks])}

    def _teacher_inputs(self, inputs):
        kwargs = super()._teacher_inputs(inputs)
        kwargs["pixel_attention_mask"] = inputs["pixel_attention_mask"]
        return kwargs

    def _image_keys(self, inputs):
        n = self._tokens_per_crop
        keys = []
        for row in inputs["input_ids"] == self.image_token_id:
            positions = row.nonzero()[:, 0]
            if len(positions) < n or len(positions) % n:
                raise ValueError(f"a row holds {len(positions)} image tokens, not a multiple of a crop's {n}.")
            keys.append(positions[-n:])  # the global image's block closes the image
        return torch.stack(keys)
