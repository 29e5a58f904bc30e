"""A tiny random Hugging Face LLaVA and its processor, built offline from configs.

For the tests and the benchmarks of :class:`~skicml.vlm.HFLlavaAdapter`
(VISTA) and of :class:`~skicml.vlm.LavenderTuner` on Hugging Face models: a
Llama decoder behind a small CLIP vision tower, with a word-level tokenizer
that knows ``<image>`` as a special token and the words of
:func:`skicml.datasets.make_object_scenes` captions (punctuation splits off
as its own token). Nothing is downloaded; the weights are random, so what it
shows is mechanics and cost, never quality.
"""

import torch

__all__ = ["TINY_LLAVA_TOKENS", "tiny_random_llava"]

#: Special token ids of the tokenizer.
TINY_LLAVA_TOKENS = {"pad": 0, "bos": 1, "eos": 2, "unk": 3, "image": 4}
_SPECIAL = ["<pad>", "<s>", "</s>", "<unk>", "<image>"]
_WORDS = ("describe the image a an of in on is there what color red blue green circle square small large "
          "left right top bottom").split()
# The rest of make_object_scenes' caption words, after the first ones so that those keep their ids.
_SCENE_WORDS = ", : at below cross detail far it its middle orange purple to triangle yellow".split()


def _tokenizer(vocab_size, split_words=()):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = _SPECIAL + _WORDS + _SCENE_WORDS
    pieces = []
    for word in split_words:
        if word not in words or len(word) < 2:
            raise ValueError(f"split_words: {word!r} is not a word of the tiny vocabulary of two letters or more.")
        words.remove(word)
        middle = len(word) // 2
        pieces += [word[:middle], "##" + word[middle:]]
    words += [piece for piece in pieces if piece not in words]
    if len(words) > vocab_size:
        raise ValueError(f"vocab_size={vocab_size} is smaller than the {len(words)} tokens of the tiny vocabulary.")
    # Filler words widen the vocabulary, so that the random model rarely picks the end token.
    words += [f"w{i}" for i in range(vocab_size - len(words))]
    vocabulary = {w: i for i, w in enumerate(words)}
    if split_words:
        # WordPiece: a word missing from the vocabulary is spelled by its pieces ("cir", "##cle").
        backend = Tokenizer(models.WordPiece(vocabulary, unk_token="<unk>"))
        backend.decoder = decoders.WordPiece()
    else:
        backend = Tokenizer(models.WordLevel(vocabulary, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", TINY_LLAVA_TOKENS["bos"])])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", bos_token="<s>",
                                        eos_token="</s>", unk_token="<unk>",
                                        extra_special_tokens={"image_token": "<image>"})
    # No token_type_ids: model.generate refuses inputs the model does not read.
    tokenizer.model_input_names = ["input_ids", "attention_mask"]
    return tokenizer


def tiny_random_llava(num_layers=3, hidden_size=32, vocab_size=96, image_size=32, patch_size=8, seed=0,
                      split_words=()):
    """``(model, processor)``: a random ``LlavaForConditionalGeneration`` in eval mode and its processor.

    The image becomes ``(image_size // patch_size) ** 2`` tokens (the
    "default" feature strategy drops the CLS feature); the decoder has
    ``num_layers`` Llama layers of width ``hidden_size`` with grouped-query
    attention (4 heads, 2 key-value heads) and an MLP twice as wide.
    ``split_words`` are words the tokenizer spells in two pieces
    (``"circle"`` becomes ``"cir"``, ``"##cle"``), as real tokenizers split
    rare words: what Lavender's word pooling has to put back together.
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
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=_tokenizer(vocab_size, split_words),
                               patch_size=patch_size, vision_feature_select_strategy="default",
                               num_additional_image_tokens=1)
    return model, processor
