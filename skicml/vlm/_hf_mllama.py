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

import torch
import torch.nn.functional as F

from ._backbone import HFLlavaAdapter

__all__ = ["HFMllamaAdapter"]


class HFMllamaAdapter(HFLlavaAdapter):
    """A Hugging Face ``MllamaForConditionalGeneration`` (Llama-3.2-Vision).

    Parameters are those of :class:`HFLlavaAdapter`; prompts hold the image
    as ``<|image|>``.

    Examples
    --------
    >>> from skicml.vlm import as_backbone
    >>> from skicml.vlm._tiny_families import tiny_random_vlm
    >>> as_backbone(*tiny_random_vlm("mllama")).cross_attention_layers
    [1, 3]
    """

    families = frozenset({"mllama"})
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
