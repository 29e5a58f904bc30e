"""A tiny random Hugging Face LLaVA and its processor, built offline from configs.

For the tests and the benchmark of :class:`~skicml.vlm.HFLlavaAdapter`: a
Llama decoder behind a small CLIP vision tower, with a word-level tokenizer
that knows ``<image>`` as a special token. Nothing is downloaded; the
weights are random, so what it shows is mechanics and cost, never quality.
"""

import torch

__all__ = ["TINY_LLAVA_TOKENS", "tiny_random_llava"]

#: Special token ids of the tokenizer.
TINY_LLAVA_TOKENS = {"pad": 0, "bos": 1, "eos": 2, "unk": 3, "image": 4}
_SPECIAL = ["<pad>", "<s>", "</s>", "<unk>", "<image>"]
_WORDS = ("describe the image a an of in on is there what color red blue green circle square small large "
          "left right top bottom").split()


def _tokenizer(vocab_size):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = _SPECIAL + _WORDS
    # Filler words widen the vocabulary, so that the random model rarely picks the end token.
    words += [f"w{i}" for i in range(vocab_size - len(words))]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", TINY_LLAVA_TOKENS["bos"])])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", bos_token="<s>",
                                        eos_token="</s>", unk_token="<unk>",
                                        extra_special_tokens={"image_token": "<image>"})
    # No token_type_ids: model.generate refuses inputs the model does not read.
    tokenizer.model_input_names = ["input_ids", "attention_mask"]
    return tokenizer


def tiny_random_llava(num_layers=3, hidden_size=32, vocab_size=96, image_size=32, patch_size=8, seed=0):
    """``(model, processor)``: a random ``LlavaForConditionalGeneration`` in eval mode and its processor.

    The image becomes ``(image_size // patch_size) ** 2`` tokens (the
    "default" feature strategy drops the CLS feature); the decoder has
    ``num_layers`` Llama layers of width ``hidden_size`` with grouped-query
    attention (4 heads, 2 key-value heads) and an MLP twice as wide.
    """
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    pad, bos, eos, image = (TINY_LLAVA_TOKENS[k] for k in ("pad", "bos", "eos", "image"))
    config = LlavaConfig(
        text_config=LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                                num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=2,
                                max_position_embeddings=256, pad_token_id=pad, bos_token_id=bos,
                                eos_token_id=eos),
        vision_config=CLIPVisionConfig(image_size=image_size, patch_size=patch_size, hidden_size=32,
                                       intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                       projection_dim=32),
        image_token_index=image, vision_feature_select_strategy="default", vision_feature_layer=-2,
        pad_token_id=pad,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    image_processor = CLIPImageProcessor(size={"shortest_edge": image_size},
                                         crop_size={"height": image_size, "width": image_size})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=_tokenizer(vocab_size),
                               patch_size=patch_size, vision_feature_select_strategy="default",
                               num_additional_image_tokens=1)
    return model, processor
