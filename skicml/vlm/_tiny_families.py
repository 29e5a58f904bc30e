"""Tiny random Hugging Face VLMs of the families beyond LLaVA-1.5, each with an offline processor.

The companions of :func:`~skicml.vlm._tiny_llava.tiny_random_llava`, for the
tests, docs and benchmarks of the family adapters: LLaVA-NeXT,
LLaVA-OneVision, Qwen2-VL, Qwen2.5-VL, Mllama (Llama-3.2-Vision), Idefics3
and SmolVLM, each built from its config classes (a 3-layer decoder of width
32 behind a 2-layer vision tower of width 32) with the processor's real
image-processor class and a word-level tokenizer that holds the family's
special tokens as atomic tokens. Nothing is downloaded; the weights are
random, so what the models show is mechanics and cost, never quality.

``tiny_random_vlm(family)`` returns ``(model, processor)``; :data:`FAMILIES`
names the families and :data:`FAMILY_PROMPTS` a prompt with the family's
image placeholder.
"""

import torch

from ._tiny_llava import _SCENE_WORDS, _WORDS

__all__ = ["FAMILIES", "FAMILY_PROMPTS", "tiny_random_vlm"]

FAMILIES = ("llava_next", "llava_onevision", "qwen2_vl", "qwen2_5_vl", "mllama", "idefics3", "smolvlm")

#: A prompt of each family with its image placeholder (Qwen: the whole vision triple).
FAMILY_PROMPTS = {
    "llava_next": "<image> describe",
    "llava_onevision": "<image> describe",
    "qwen2_vl": "<|vision_start|><|image_pad|><|vision_end|> describe",
    "qwen2_5_vl": "<|vision_start|><|image_pad|><|vision_end|> describe",
    "mllama": "<|image|> describe",
    "idefics3": "<image> describe",
    "smolvlm": "<image> describe",
}

_QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                 "<|image_pad|>", "<|video_pad|>"]
_IDEFICS_SPECIAL = (["<|end_of_text|>", "<|begin_of_text|>", "<end_of_utterance>", "<unk>", "<image>",
                     "<fake_token_around_image>", "<global-img>", "<video>"]
                    + [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)])
_SPECIAL = {
    "llava_next": ["<pad>", "<s>", "</s>", "<unk>", "<image>"],
    "llava_onevision": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>", "<image>", "<video>"],
    "qwen2_vl": _QWEN_SPECIAL,
    "qwen2_5_vl": _QWEN_SPECIAL,
    "mllama": ["<|finetune_right_pad_id|>", "<|begin_of_text|>", "<|eot_id|>", "<unk>", "<|python_tag|>",
               "<|start_header_id|>", "<|end_header_id|>"],
    "idefics3": _IDEFICS_SPECIAL,
    "smolvlm": _IDEFICS_SPECIAL,
}
_SIZES = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2)


def _tokenizer(special, vocab_size, *, fast_class=None, bos=None, extra=(), **names):
    """A word-level fast tokenizer: ``special`` first (atomic special tokens), the scene words, then fillers."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = list(special) + [w for w in _WORDS + _SCENE_WORDS if w not in special]
    words += [f"w{i}" for i in range(vocab_size - len(words))]
    vocabulary = {w: i for i, w in enumerate(words)}
    for k, token in enumerate(extra):  # beyond the LM head's vocabulary (Mllama's <|image|>)
        vocabulary[token] = vocab_size + k
    backend = Tokenizer(models.WordLevel(vocabulary, unk_token="<unk>" if "<unk>" in vocabulary else special[0]))
    backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in list(special) + list(extra)])
    if bos is not None:
        backend.post_processor = processors.TemplateProcessing(single=f"{bos} $A",
                                                               special_tokens=[(bos, vocabulary[bos])])
    cls = fast_class or PreTrainedTokenizerFast
    tokenizer = cls(tokenizer_object=backend, padding_side="left", **names)
    tokenizer.model_input_names = ["input_ids", "attention_mask"]
    return tokenizer


def _llava_next(seed):
    from transformers import (CLIPVisionConfig, LlamaConfig, LlavaNextConfig, LlavaNextForConditionalGeneration,
                              LlavaNextImageProcessor, LlavaNextProcessor)

    pinpoints = [[32, 64], [64, 32], [64, 64]]
    config = LlavaNextConfig(
        vision_config=CLIPVisionConfig(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64,
                                       num_hidden_layers=2, num_attention_heads=4, projection_dim=32),
        text_config=LlamaConfig(vocab_size=96, max_position_embeddings=512, pad_token_id=0, bos_token_id=1,
                                eos_token_id=2, **_SIZES),
        image_token_index=4, image_grid_pinpoints=pinpoints, vision_feature_select_strategy="default",
        vision_feature_layer=-2, pad_token_id=0)
    torch.manual_seed(seed)
    model = LlavaNextForConditionalGeneration(config).eval()
    tokenizer = _tokenizer(_SPECIAL["llava_next"], 96, bos="<s>", pad_token="<pad>", bos_token="<s>",
                           eos_token="</s>", unk_token="<unk>", extra_special_tokens={"image_token": "<image>"})
    images = LlavaNextImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32},
                                     image_grid_pinpoints=pinpoints)
    processor = LlavaNextProcessor(image_processor=images, tokenizer=tokenizer, patch_size=8,
                                   vision_feature_select_strategy="default", num_additional_image_tokens=1)
    return model, processor


def _llava_onevision(seed):
    from transformers import (LlavaOnevisionConfig, LlavaOnevisionForConditionalGeneration,
                              LlavaOnevisionImageProcessor, LlavaOnevisionProcessor, LlavaOnevisionVideoProcessor,
                              Qwen2Config, SiglipVisionConfig)

    pinpoints = [[32, 32], [32, 64], [64, 32], [64, 64], [32, 96], [96, 32]]
    config = LlavaOnevisionConfig(
        vision_config=SiglipVisionConfig(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, vision_use_head=False),
        text_config=Qwen2Config(vocab_size=96, max_position_embeddings=512, pad_token_id=0, eos_token_id=2,
                                tie_word_embeddings=False, **_SIZES),
        image_token_index=4, video_token_index=5, image_grid_pinpoints=pinpoints,
        vision_feature_select_strategy="full", vision_feature_layer=-1, vision_aspect_ratio="anyres_max_9",
        tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = LlavaOnevisionForConditionalGeneration(config).eval()
    tokenizer = _tokenizer(_SPECIAL["llava_onevision"], 96, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                           unk_token="<unk>", extra_special_tokens={"image_token": "<image>", "video_token": "<video>"})
    size = {"height": 32, "width": 32}
    processor = LlavaOnevisionProcessor(
        image_processor=LlavaOnevisionImageProcessor(size=size, image_grid_pinpoints=pinpoints),
        tokenizer=tokenizer, video_processor=LlavaOnevisionVideoProcessor(size=size), num_image_tokens=16,
        vision_feature_select_strategy="full")
    model.generation_config.eos_token_id = 2
    return model, processor


def _qwen(version, seed):
    from transformers import Qwen2TokenizerFast, Qwen2VLImageProcessor

    text = dict(vocab_size=96, max_position_embeddings=512, rope_theta=1e4, tie_word_embeddings=False,
                rope_scaling={"type": "mrope", "mrope_section": [2, 1, 1]}, pad_token_id=0, eos_token_id=2,
                **_SIZES)
    tokens = dict(vision_start_token_id=3, vision_end_token_id=4, image_token_id=5, video_token_id=6)
    pixels = dict(min_pixels=256, max_pixels=4096, patch_size=8, merge_size=2, temporal_patch_size=2)
    if version == 2:
        from transformers import (Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLProcessor,
                                  Qwen2VLVideoProcessor)

        vision = dict(depth=2, embed_dim=32, hidden_size=32, num_heads=4, mlp_ratio=2, patch_size=8,
                      spatial_merge_size=2, temporal_patch_size=2)
        config_cls, model_cls, processor_cls, video_cls = (Qwen2VLConfig, Qwen2VLForConditionalGeneration,
                                                           Qwen2VLProcessor, Qwen2VLVideoProcessor)
    else:
        from transformers import (Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor,
                                  Qwen2VLVideoProcessor)

        vision = dict(depth=2, hidden_size=32, intermediate_size=64, out_hidden_size=32, num_heads=4, patch_size=8,
                      spatial_merge_size=2, temporal_patch_size=2, window_size=32, fullatt_block_indexes=[1])
        config_cls, model_cls, processor_cls, video_cls = (Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration,
                                                           Qwen2_5_VLProcessor, Qwen2VLVideoProcessor)
    config = config_cls(text_config=text, vision_config=vision, tie_word_embeddings=False, **tokens)
    torch.manual_seed(seed)
    model = model_cls(config).eval()
    tokenizer = _tokenizer(_QWEN_SPECIAL, 96, fast_class=Qwen2TokenizerFast, pad_token="<|endoftext|>",
                           eos_token="<|im_end|>", unk_token="<|endoftext|>")
    processor = processor_cls(image_processor=Qwen2VLImageProcessor(**pixels), tokenizer=tokenizer,
                              video_processor=video_cls(**pixels))
    model.generation_config.eos_token_id = 2
    model.generation_config.pad_token_id = 0
    return model, processor


def _mllama(seed):
    from transformers import (MllamaConfig, MllamaForConditionalGeneration, MllamaImageProcessor,
                              MllamaProcessor)

    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_global_layers=1,
                  num_attention_heads=4, attention_heads=4, image_size=16, patch_size=8, max_num_tiles=4,
                  intermediate_layers_indices=[0], vision_output_dim=64,
                  supported_aspect_ratios=[[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]])
    text = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, cross_attention_layers=[1, 3], max_position_embeddings=512,
                rope_scaling={"rope_type": "default"}, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    config = MllamaConfig(vision_config=vision, text_config=text, image_token_index=96)
    torch.manual_seed(seed)
    model = MllamaForConditionalGeneration(config).eval()
    with torch.no_grad():  # the cross-attention gates start at 0: the image would have no effect
        for layer in model.model.language_model.layers:
            if hasattr(layer, "cross_attn_attn_gate"):
                layer.cross_attn_attn_gate.fill_(1.0)
                layer.cross_attn_mlp_gate.fill_(1.0)
    tokenizer = _tokenizer(_SPECIAL["mllama"], 96, extra=["<|image|>"], pad_token="<|finetune_right_pad_id|>",
                           bos_token="<|begin_of_text|>", eos_token="<|eot_id|>", unk_token="<unk>")
    images = MllamaImageProcessor(size={"height": 16, "width": 16}, max_image_tiles=4)
    model.generation_config.eos_token_id = 2
    model.generation_config.pad_token_id = 0
    return model, MllamaProcessor(image_processor=images, tokenizer=tokenizer)


def _idefics3(smol, seed):
    from transformers import Idefics3ImageProcessor, Idefics3Processor

    if smol:
        from transformers import SmolVLMConfig as config_cls
        from transformers import SmolVLMForConditionalGeneration as model_cls
    else:
        from transformers import Idefics3Config as config_cls
        from transformers import Idefics3ForConditionalGeneration as model_cls
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, image_size=32,
                  patch_size=8)
    text = dict(model_type="llama", vocab_size=128, max_position_embeddings=1024, pad_token_id=0, bos_token_id=1,
                eos_token_id=2, **_SIZES)
    config = config_cls(vision_config=vision, text_config=text, image_token_id=4, scale_factor=2,
                        pad_token_id=0)
    torch.manual_seed(seed)
    model = model_cls(config).eval()
    tokenizer = _tokenizer(_IDEFICS_SPECIAL, 128, bos="<|begin_of_text|>", pad_token="<|end_of_text|>",
                           bos_token="<|begin_of_text|>", eos_token="<end_of_utterance>", unk_token="<unk>")
    images = Idefics3ImageProcessor(size={"longest_edge": 64}, max_image_size={"longest_edge": 32})
    model.generation_config.eos_token_id = 2
    model.generation_config.pad_token_id = 0
    return model, Idefics3Processor(image_processor=images, tokenizer=tokenizer, image_seq_len=4)


def tiny_random_vlm(family, seed=0):
    """``(model, processor)``: a random model of ``family`` (one of :data:`FAMILIES`) in eval mode, and its processor.

    Sizes: 32-pixel tiles (16 for Mllama) of 8-pixel patches, a 2-layer
    vision tower of width 32, and a decoder of width 32 with 4 heads over 2
    key-value heads (3 layers; Mllama's 4 are self, cross, self, cross, with
    the cross-attention gates opened to 1). Image tokens: LLaVA-NeXT and
    OneVision a 4 x 4 base block, then the canvas of 32-pixel tiles
    (pinpoints up to 64 x 64, 96 x 32 for OneVision) unpadded to the
    image's aspect ratio with a newline token a row; Qwen a grid of 16-pixel
    cells after merging (4 tokens for 32 x 32, 8 for 40 x 72); Idefics3 and
    SmolVLM 4 tokens a crop, 2 x 2 crops of an image upsampled to 64 pixels
    and the global image; Mllama none (cross-attention over 4 tiles of 2 x 2
    patches and a CLS each, 16-pixel tiles).
    """
    builders = {"llava_next": _llava_next, "llava_onevision": _llava_onevision,
                "qwen2_vl": lambda s: _qwen(2, s), "qwen2_5_vl": lambda s: _qwen(2.5, s), "mllama": _mllama,
                "idefics3": lambda s: _idefics3(False, s), "smolvlm": lambda s: _idefics3(True, s)}
    if family not in builders:
        raise ValueError(f"family={family!r}; expected one of {list(FAMILIES)}.")
    return builders[family](seed)
