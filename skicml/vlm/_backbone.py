"""The causal-VLM protocol that VISTA and Lavender drive, and its adapters.

A backbone is any object with these members (duck-typed; nothing here
subclasses a particular model class):

``layers``
    The decoder layers in order; each one's forward output (or the first
    element of its output tuple) is the residual stream after that layer.
``mlp_of(layer)``
    The layer's MLP (feed-forward) submodule.
``final_norm(h)``, ``lm_head``
    The norm before the LM head, and the head itself: a bias-free linear
    map with a ``weight`` of shape (vocab_size, hidden_size).
``hidden_size``, ``eos_token_id``
``build_inputs(images, prompts, with_image)``
    The model inputs of a batch, left-padded; ``with_image=False`` gives
    the same prompts with the image left out (VISTA's negative context).
``prefill(inputs)`` and ``step(token_ids, state)``
    Run the prompt, then one new token a row, each returning the
    final-normed hidden state of the last position (B, hidden_size) and the
    decoding state (the KV cache and masks).
``reorder(state, index)``
    The state with its rows taken at ``index`` (beam search).
``decode(token_ids)``
    Text of generated token ids, stopping at the end token.
``token_id(word)`` (optional)
    The id of a word's first token; :meth:`VISTASteerer.token_rankings`
    needs it to track words given as strings.

Fine-tuning members (optional; :class:`LavenderTuner` needs them, see
:data:`TUNING_PROTOCOL`):

``model``, ``with_model(model)``
    The ``nn.Module`` holding every weight, and the same kind of backbone
    around another module (the tuner's private copy).
``language_model``, ``default_lora_targets``
    The module whose linear layers LoRA adapts (adapter names are relative
    to it), and the names it adapts unless told otherwise.
``n_heads``, ``image_grid``
    Attention heads of a decoder layer; (rows, columns) of the image tokens.
``caption_batch(images, prompts, captions)``
    Teacher-forcing rows ``prompt caption <end>``, right-padded, as a dict
    of CPU tensors: ``input_ids``, ``attention_mask``, ``target`` (bool,
    the tokens a caption loss predicts: the caption's and the end token)
    and the image tensors the model reads; and, per row, the caption's
    words as ``(word, token positions)`` pairs, words lower-cased, a word
    of several tokens holding all their positions.
``word_token_ids(word)``
    The ids of single tokens that spell ``word`` (none when it takes
    several), for keying a position by the word it predicts.
``teacher_forced(inputs, attention_layers=None, attention_rows=None)``
    Logits ``(B, T, vocab)`` of ``inputs`` (``logits[:, i]`` predicts
    token ``i + 1``) and, with ``attention_layers``, the attention of the
    query positions ``attention_rows`` ((N, 2) sample and position pairs)
    to the image tokens in raster order, ``(N, n_layers, n_heads,
    rows * columns)``, differentiable.

:class:`TinyVLM` follows the protocol through :func:`as_backbone`;
:class:`HFLlavaAdapter` wraps a Hugging Face LLaVA-style model and its
processor, and its subclasses the other families (:data:`HF_FAMILIES`:
LLaVA-NeXT and OneVision, Qwen2-VL and 2.5-VL, Mllama, Idefics3 and SmolVLM,
each in its own ``_hf_*`` module), chosen by ``as_backbone(model,
processor)`` from ``model.config.model_type``; :class:`CallableAdapter`
builds a backbone from functions (the decoding members only).
"""

from __future__ import annotations

import re
import sys

import numpy as np
import torch
from torch import nn

from ..ops import row_logsumexp, subblock_attention_probs
from ._model import TinyVLM
from ._text import WordTokenizer, encode_captions

__all__ = ["CallableAdapter", "HFLlavaAdapter", "as_backbone", "check_backbone", "check_tunable", "hf_adapter"]

PROTOCOL = ("layers", "mlp_of", "final_norm", "lm_head", "hidden_size", "eos_token_id", "build_inputs",
            "prefill", "step", "reorder", "decode")
#: What fine-tuning with attention alignment (LavenderTuner) needs beyond :data:`PROTOCOL`.
TUNING_PROTOCOL = ("model", "with_model", "language_model", "default_lora_targets", "n_heads", "image_grid",
                   "caption_batch", "word_token_ids", "teacher_forced")
#: A word of a caption, as teachers key their maps: letters and digits, lower-cased; punctuation is no word.
WORD = re.compile(r"[^\W_]+")
_MLP_NAMES = ("mlp", "feed_forward", "ffn", "feedforward")


def find_mlp(layer):
    """The first submodule of ``layer`` whose name says it is the MLP, as the official VISTA code looks it up."""
    for name in _MLP_NAMES:
        if isinstance(getattr(layer, name, None), nn.Module):
            return getattr(layer, name)
    for name, module in layer.named_modules():
        if any(key in name.lower() for key in _MLP_NAMES):
            return module
    raise ValueError(
        f"found no MLP in decoder layer {type(layer).__name__}: no submodule is named like one of "
        f"{_MLP_NAMES}; its children are {[n for n, _ in layer.named_children()]}. Give the backbone an "
        "mlp_of(layer) method (CallableAdapter(mlp_of=...))."
    )


def longest_module_list(model):
    """The longest ``nn.ModuleList`` inside ``model``: its decoder layers, when nothing names them."""
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList)]
    if not lists:
        raise ValueError(f"{type(model).__name__} holds no nn.ModuleList of decoder layers; pass layers=.")
    return max(lists, key=len)


def _prompt_list(prompts, n):
    if isinstance(prompts, str):
        prompts = [prompts] * n
    prompts = list(prompts)
    if len(prompts) != n:
        raise ValueError(f"got {len(prompts)} prompts for {n} images.")
    for prompt in prompts:
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"every prompt must be a non-empty string; got {prompt!r}.")
    return prompts


class _TinyVLMBackbone:
    """:class:`TinyVLM` seen through the protocol: words in, left padding, its own KV cache."""

    def __init__(self, model):
        self.model = model
        self.tokenizer = WordTokenizer(model.vocabulary)
        self.layers = model.layers
        self.lm_head = model.lm_head
        self.final_norm = model.norm
        self.hidden_size = model.config["hidden_size"]
        self.eos_token_id = self.tokenizer.eos_token_id
        self.image_size = model.image_size

    def mlp_of(self, layer):
        return layer.mlp

    @property
    def device(self):
        return self.model.lm_head.weight.device

    def images_tensor(self, images):
        images = np.asarray(images)
        if images.ndim != 4 or images.shape[1:] != (self.image_size, self.image_size, 3):
            raise ValueError(f"TinyVLM reads RGB images of shape ({self.image_size}, {self.image_size}, 3); "
                             f"got a batch of shape {images.shape}.")
        scale = 255.0 if images.dtype.kind in "iu" else 1.0
        return torch.as_tensor(images / scale, dtype=torch.float32, device=self.device)

    def encode_prompts(self, prompts):
        rows = []
        for prompt in prompts:
            unknown = self.tokenizer.unknown_words(prompt)
            if unknown:
                raise ValueError(f"the prompt {prompt!r} has words outside TinyVLM's vocabulary: {unknown}.")
            rows.append([self.tokenizer.bos_token_id] + self.tokenizer.encode(prompt))
        width = max(map(len, rows))
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        mask = torch.zeros(len(rows), width, dtype=torch.bool)
        for i, row in enumerate(rows):
            ids[i, width - len(row):] = torch.as_tensor(row)
            mask[i, width - len(row):] = True
        return ids.to(self.device), mask.to(self.device)

    def build_inputs(self, images, prompts, with_image=True):
        n = len(images)
        ids, mask = self.encode_prompts(_prompt_list(prompts, n))
        return {"token_ids": ids, "token_mask": mask, "images": self.images_tensor(images) if with_image else None}

    def prefill(self, inputs):
        hidden, cache = self.model(**inputs)
        return hidden[:, -1], cache

    def step(self, token_ids, state):
        hidden, cache = self.model(token_ids[:, None], cache=state)
        return hidden[:, -1], cache

    def reorder(self, state, index):
        return {"layers": [(k[index], v[index]) for k, v in state["layers"]],
                "key_mask": state["key_mask"][index], "next_position": state["next_position"][index]}

    def decode(self, token_ids):
        return self.tokenizer.decode(token_ids)

    def token_id(self, word):
        if word not in self.tokenizer.index:
            raise ValueError(f"{word!r} is not a word of TinyVLM's vocabulary; it has "
                             f"{len(self.tokenizer)} words, e.g. {self.tokenizer.vocabulary[4:10]}.")
        return self.tokenizer.index[word]

    # -- fine-tuning members -------------------------------------------
    default_lora_targets = ("qkv",)

    @property
    def language_model(self):
        return self.model  # its only linear layers are the decoder's

    @property
    def n_heads(self):
        return self.model.layers[0].n_heads

    @property
    def image_grid(self):
        side = self.image_size // self.model.config["patch_size"]
        return side, side

    def with_model(self, model):
        return _TinyVLMBackbone(model)

    def caption_batch(self, images, prompts, captions):
        for text in ([prompts] if isinstance(prompts, str) else list(prompts)) + list(captions):
            unknown = self.tokenizer.unknown_words(text)
            if unknown:
                raise ValueError(f"{text!r} holds words outside the backbone's vocabulary: {unknown[:10]}.")
        ids, mask, target = encode_captions(self.tokenizer, prompts, captions)
        words = []
        for row, caption in zip(target, captions):
            start = int(row.nonzero()[0])  # the caption's first token; one token a word
            words.append([(token, [start + k]) for k, token in enumerate(self.tokenizer.words(caption))
                          if WORD.fullmatch(token)])
        inputs = {"input_ids": ids, "attention_mask": mask, "target": target,
                  "images": self.images_tensor(images).cpu()}
        return inputs, words

    def word_token_ids(self, word):
        return [self.tokenizer.index[word]] if word in self.tokenizer.index else []

    def teacher_forced(self, inputs, attention_layers=None, attention_rows=None):
        # The image tokens come first, so query position i of the text is sequence position n_image + i.
        n_image = self.model.n_image_tokens
        output = self.model(inputs["input_ids"], images=inputs["images"], token_mask=inputs["attention_mask"],
                            attention_layers=attention_layers)
        logits = self.model.logits(output[0][:, n_image:])
        if attention_layers is None:
            return logits, None
        rows = attention_rows
        # Two advanced indices split by a slice put their dimension first: (N, layers, heads, n_image).
        return logits, output[2][:, rows[:, 0], :, rows[:, 1] + n_image, :n_image]


def check_backbone(backbone):
    """Raise a clear error naming the protocol members ``backbone`` lacks."""
    missing = [name for name in PROTOCOL if not hasattr(backbone, name)]
    if missing:
        raise TypeError(
            f"{type(backbone).__name__} is not a VLM backbone: it lacks {missing}. Pass a TinyVLM, an "
            "HFLlavaAdapter(model, processor), a CallableAdapter, or an object with all of "
            f"{list(PROTOCOL)}."
        )
    if not len(backbone.layers):
        raise ValueError(f"{type(backbone).__name__} has no decoder layers.")
    return backbone


def check_tunable(backbone, who="LavenderTuner"):
    """Raise a clear error naming the fine-tuning members (:data:`TUNING_PROTOCOL`) ``backbone`` lacks."""
    # A property is looked up on the class: one may raise until the first caption batch (Qwen's image grid).
    missing = [name for name in TUNING_PROTOCOL if not (hasattr(type(backbone), name) or hasattr(backbone, name))]
    if missing:
        raise TypeError(
            f"{who} fine-tunes a TinyVLM or a Hugging Face LLaVA-style model (HFLlavaAdapter(model, processor)); "
            f"{type(backbone).__name__} lacks the fine-tuning members {missing} of the backbone protocol."
        )
    return backbone


def as_backbone(backbone, processor=None, **options):
    """A protocol object for ``backbone``.

    A :class:`TinyVLM`, a shipped model's name, a Hugging Face model with
    its processor (``as_backbone(model, processor)`` or the pair ``(model,
    processor)``, wrapped in the adapter of the model's family, chosen from
    ``model.config``: see :func:`hf_adapter`; ``options`` go to the
    adapter, e.g. ``canvas="official"`` for Mllama), or a protocol object.
    """
    if processor is not None:
        backbone = (backbone, processor)
    if options and not (isinstance(backbone, (tuple, list)) and len(backbone) == 2):
        raise TypeError(f"options {sorted(options)} go to a Hugging Face adapter: pass as_backbone(model, processor, "
                        "...).")
    if isinstance(backbone, str):
        from ._pretrained import load_tiny_vlm

        backbone = load_tiny_vlm(backbone)
    if isinstance(backbone, TinyVLM):
        return _TinyVLMBackbone(backbone)
    if isinstance(backbone, (tuple, list)) and len(backbone) == 2 and isinstance(backbone[0], nn.Module):
        return hf_adapter(*backbone, **options)
    if isinstance(backbone, nn.Module) and hasattr(backbone, "config") and not hasattr(backbone, "prefill"):
        raise TypeError(f"a Hugging Face {type(backbone).__name__} needs its processor: pass "
                        "as_backbone(model, processor) or the pair (model, processor).")
    return check_backbone(backbone)


#: The adapter of each Hugging Face family, by ``config.model_type``; each lives in its own ``_hf_*`` module.
HF_FAMILIES = {
    "llava": "HFLlavaAdapter",
    "llava_next": "HFLlavaNextAdapter",
    "llava_onevision": "HFLlavaNextAdapter",
    "qwen2_vl": "HFQwen2VLAdapter",
    "qwen2_5_vl": "HFQwen2VLAdapter",
    "mllama": "HFMllamaAdapter",
    "idefics3": "HFIdefics3Adapter",
    "smolvlm": "HFIdefics3Adapter",
}


def _family_adapter(name):
    """The adapter class called ``name`` (imported when first asked for: the modules import _backbone)."""
    if name == "HFLlavaNextAdapter":
        from ._hf_llava_next import HFLlavaNextAdapter as found
    elif name == "HFQwen2VLAdapter":
        from ._hf_qwen2_vl import HFQwen2VLAdapter as found
    elif name == "HFMllamaAdapter":
        from ._hf_mllama import HFMllamaAdapter as found
    elif name == "HFIdefics3Adapter":
        from ._hf_idefics3 import HFIdefics3Adapter as found
    else:
        found = HFLlavaAdapter
    return found


def hf_adapter(model, processor, **kwargs):
    """The adapter of a Hugging Face VLM's family (:data:`HF_FAMILIES`), chosen from ``model.config.model_type``.

    A model type outside the table goes to :class:`HFLlavaAdapter`, which
    refuses architectures it would run on wrong positions or attention
    (3-D multimodal rotary positions, cross-attention to the image).
    """
    family = getattr(getattr(model, "config", None), "model_type", None)
    return _family_adapter(HF_FAMILIES.get(family, "HFLlavaAdapter"))(model, processor, **kwargs)


class CallableAdapter:
    """A backbone from plain functions, for models no adapter knows.

    Parameters
    ----------
    layers : sequence of nn.Module
        The decoder layers, in order.
    lm_head : nn.Module
        Bias-free linear LM head (``weight`` of shape (vocab, hidden)).
    final_norm : callable
    build_inputs : callable
        ``build_inputs(images, prompts, with_image) -> inputs``.
    prefill : callable
        ``prefill(inputs) -> (last_hidden, state)``, the hidden state final-normed.
    step : callable
        ``step(token_ids, state) -> (last_hidden, state)``.
    decode : callable
        ``decode(token_ids) -> str``.
    eos_token_id : int
    reorder : callable or None, default=None
        ``reorder(state, index) -> state``; needed by beam search only.
    mlp_of : callable or None, default=None
        ``mlp_of(layer) -> nn.Module``; by default the submodule named like an MLP.
    token_id : callable or None, default=None
        ``token_id(word) -> int``; needed to track words given as strings.
    """

    def __init__(self, *, layers, lm_head, final_norm, build_inputs, prefill, step, decode, eos_token_id,
                 reorder=None, mlp_of=None, token_id=None):
        self.layers = list(layers)
        self.lm_head = lm_head
        self.final_norm = final_norm
        self.build_inputs = build_inputs
        self.prefill = prefill
        self.step = step
        self.decode = decode
        self.eos_token_id = int(eos_token_id)
        self._reorder = reorder
        self._mlp_of = mlp_of
        self._token_id = token_id
        self.hidden_size = int(lm_head.weight.shape[1])

    def mlp_of(self, layer):
        return self._mlp_of(layer) if self._mlp_of is not None else find_mlp(layer)

    def reorder(self, state, index):
        if self._reorder is None:
            raise ValueError("this CallableAdapter has no reorder=; beam search needs one.")
        return self._reorder(state, index)

    def token_id(self, word):
        if self._token_id is None:
            raise ValueError("this CallableAdapter has no token_id=; pass token ids, or build it with one.")
        return int(self._token_id(word))


# What a tokenizer may return that LLaVA-style forwards do not read.
_UNREAD_INPUTS = ("token_type_ids", "mm_token_type_ids")


def _without_placeholder(prompt, placeholder):
    """``prompt`` with ``placeholder`` cut out, and the whitespace that separated it from the text.

    ``"USER: <image>\\nQ"`` becomes ``"USER: Q"`` (the official code's null
    prompt, the template without the image), ``"Q <image>"`` becomes ``"Q"``.
    """
    import re

    token = re.escape(placeholder)
    return re.sub(token + r"\s*", "", re.sub(r"\s*" + token + r"\s*$", "", prompt))


def _reorder_cache(cache, index):
    """A Hugging Face KV cache with its batch rows taken at ``index``; ``cache`` itself is left as it was.

    A :class:`transformers.DynamicCache` (what the 4.5x models return) is
    copied layer by layer and reordered with its own ``reorder_cache``; the
    legacy tuple-of-(key, value) format is indexed directly.
    """
    if isinstance(cache, (tuple, list)):
        return tuple(tuple(t.index_select(0, index.to(t.device)) for t in layer) for layer in cache)
    if not hasattr(cache, "reorder_cache"):
        raise TypeError(f"cannot reorder a {type(cache).__name__} for beam search: it has no reorder_cache.")
    if isinstance(getattr(cache, "layers", None), list):
        import copy

        # reorder_cache rebinds each layer's tensors: shallow copies keep the given cache intact.
        original, cache = cache, copy.copy(cache)
        cache.layers = [copy.copy(layer) for layer in original.layers]
    cache.reorder_cache(index)
    return cache


class HFLlavaAdapter:
    """A Hugging Face LLaVA-style model (``LlavaForConditionalGeneration`` and relatives) as a backbone.

    The model is run through its base model (``model.model``, the vision
    tower, projector and language model, transformers >= 4.52), whose last
    hidden state is already final-normed; the LM head is applied by the
    decoding loop. Rows are left-padded: positions count only the real
    tokens of a row and padding is masked, as ``model.generate`` does, so a
    row decodes the same alone or in a batch. The KV cache is the model's
    own (a ``DynamicCache``); beam search reorders a copy of it.

    It refuses, naming the family, the architectures its 1-D positions
    and self-attention hooks would run wrongly (3-D multimodal rotary
    positions, cross-attention to the image) and those that have their own
    adapter: ``as_backbone(model, processor)`` picks the right one.

    Parameters
    ----------
    model : transformers model
        Loaded by you (``from_pretrained(path, local_files_only=True)`` or
        built from a config); skicml never takes a hub name.
    processor : transformers processor
        Its tokenizer is switched to left padding.
    image_token : str or None, default=None
        The placeholder of the image in prompts; by default the processor's
        ``image_token``. Prompts must contain it: the negative context is
        the same prompt with it cut out (with the whitespace after it), the
        text alone tokenised and no pixels.

    Examples
    --------
    >>> from skicml.vlm import HFLlavaAdapter
    >>> HFLlavaAdapter.__name__
    'HFLlavaAdapter'
    """

    def __init__(self, model, processor, image_token=None):
        self.model = model
        self.processor = processor
        self._image_token_given = image_token
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.tokenizer.padding_side = "left"
        self.image_token = image_token or getattr(processor, "image_token", None) or "<image>"
        self._check_image_token(model, processor, image_token)
        self._check_family(model)
        self.core = self._core_model(model)
        language = self._language_model(model)
        self.language_model = language
        self.layers = language.layers if hasattr(language, "layers") else longest_module_list(model)
        self.final_norm = language.norm
        self.lm_head = model.lm_head if hasattr(model, "lm_head") else model.get_output_embeddings()
        self.hidden_size = int(self.lm_head.weight.shape[1])
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        if eos is None:
            eos = self.tokenizer.eos_token_id
        if isinstance(eos, (list, tuple)):
            eos = eos[0] if eos else None
        if eos is None:
            raise ValueError("found no end token: neither model.generation_config.eos_token_id nor the "
                             "tokenizer's eos_token_id is set.")
        self.eos_token_id = int(eos)

    @staticmethod
    def _check_image_token(model, processor, image_token):
        if image_token is not None:
            return
        given = getattr(processor, "image_token_id", None)
        config = getattr(model, "config", None)
        expected = getattr(config, "image_token_id", None)
        if expected is None:
            expected = getattr(config, "image_token_index", None)
        if isinstance(given, int) and isinstance(expected, int) and given != expected:
            raise ValueError(f"the processor's image token {processor.image_token!r} has id {given}, but the "
                             f"model's config.image_token_id is {expected}: they must be the same token.")

    #: The ``config.model_type`` values this class runs (None: any the checks below let through).
    families = None

    @property
    def family(self):
        """The model's ``config.model_type`` (``"llava"``, ``"qwen2_vl"``, ...)."""
        return str(getattr(self.model.config, "model_type", type(self.model).__name__))

    def _check_family(self, model):
        """Refuse an architecture this adapter would run silently wrong, naming what it lacks."""
        config = getattr(model, "config", None)
        family = getattr(config, "model_type", type(model).__name__)
        if self.families is not None:
            if family not in self.families:
                raise ValueError(f"{type(self).__name__} runs the {sorted(self.families)} families; "
                                 f"{type(model).__name__} is {family!r}: use as_backbone(model, processor).")
            return
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        rope = getattr(text, "rope_scaling", None) or {}
        if HF_FAMILIES.get(family, "HFLlavaAdapter") != "HFLlavaAdapter":
            raise ValueError(f"{type(model).__name__} ({family!r}) has its own adapter, "
                             f"{HF_FAMILIES[family]}: pass as_backbone(model, processor).")
        if rope.get("type", rope.get("rope_type")) == "mrope" or "mrope_section" in rope:
            raise ValueError(f"{type(model).__name__} ({family!r}) uses 3-D multimodal rotary positions (M-RoPE), "
                             "which HFLlavaAdapter's 1-D positions would get silently wrong; no adapter knows this "
                             "family.")
        if getattr(text, "cross_attention_layers", None):
            raise ValueError(f"{type(model).__name__} ({family!r}) reads the image through cross-attention layers, "
                             "which HFLlavaAdapter does not drive; no adapter knows this family.")

    @staticmethod
    def _core_model(model):
        core = getattr(model, "model", None)
        if core is None or not hasattr(core, "language_model"):
            raise ValueError(f"{type(model).__name__} has no model.model.language_model: HFLlavaAdapter "
                             "needs the transformers >= 4.52 layout of LLaVA-style models; use CallableAdapter.")
        return core

    @staticmethod
    def _language_model(model):
        inner = getattr(model, "model", model)
        for name in ("language_model", "text_model"):
            if hasattr(inner, name):
                found = getattr(inner, name)
                return getattr(found, "model", found)
        raise ValueError(f"found no language model inside {type(model).__name__} (looked for "
                         "model.model.language_model); use CallableAdapter.")

    def mlp_of(self, layer):
        return find_mlp(layer)

    @property
    def device(self):
        return self.model.get_input_embeddings().weight.device

    def _to_model(self, batch):
        dtype = self.lm_head.weight.dtype
        moved = {}
        for key, value in batch.items():
            if key in _UNREAD_INPUTS:
                continue
            value = torch.as_tensor(value).to(self.device)
            moved[key] = value.to(dtype) if value.is_floating_point() else value
        return moved

    #: The placeholder the negative context cuts out (a family may cut more than the image token).
    @property
    def _placeholder(self):
        return self.image_token

    def _check_prompt(self, prompt):
        if self._placeholder not in prompt:
            raise ValueError(f"the prompt {prompt!r} has no image placeholder {self._placeholder!r}; "
                             "VISTA's negative context is the prompt with it cut out.")

    def _processor_images(self, pictures):
        """The processor's ``images=`` argument for one image a sample (a flat list; some families nest it)."""
        return pictures

    def _negative_batch(self, texts):
        return self.tokenizer(texts, padding=True, return_tensors="pt")

    def build_inputs(self, images, prompts, with_image=True):
        prompts = _prompt_list(prompts, len(images))
        for prompt in prompts:
            self._check_prompt(prompt)
        if with_image:
            from ..utils.images import pil_from_array

            pictures = [pil_from_array(np.asarray(image)) for image in images]
            batch = self.processor(images=self._processor_images(pictures), text=prompts, padding=True,
                                   return_tensors="pt")
        else:
            texts = [_without_placeholder(p, self._placeholder) for p in prompts]
            batch = self._negative_batch(texts)
        return self._to_model(batch)

    def _positions(self, inputs, state):
        """Position ids of ``inputs`` and each row's next position; ``state`` is None at the prefill."""
        # Left padding: a row's positions count its real tokens only (padding is masked anyway).
        positions = (inputs["attention_mask"].long().cumsum(-1) - 1).clamp(min=0)
        if state is not None:
            positions = state["next_position"][:, None] + positions
        return positions, positions[:, -1] + 1

    def _step_inputs(self, state):
        """What a decoding step passes beside its token (a family's per-row masks)."""
        return {}

    def _carried(self, inputs):
        """What the prefill keeps in the decoding state for the steps (tensors of batch-first rows)."""
        return {}

    def _run(self, inputs, state):
        mask = inputs["attention_mask"]
        positions, next_position = self._positions(inputs, state)
        if state is not None:
            mask = torch.cat([state["attention_mask"], mask], dim=1)
            inputs = {**inputs, **self._step_inputs(state)}
        out = self.core(**{**inputs, "attention_mask": mask}, position_ids=positions,
                        past_key_values=None if state is None else state["cache"], use_cache=True,
                        return_dict=True)
        carried = self._carried(inputs) if state is None else {k: state[k] for k in state
                                                              if k not in ("cache", "attention_mask", "next_position")}
        state = {"cache": out.past_key_values, "attention_mask": mask, "next_position": next_position, **carried}
        return out.last_hidden_state[:, -1], state

    def prefill(self, inputs):
        return self._run(dict(inputs), None)

    def step(self, token_ids, state):
        token_ids = token_ids.to(state["attention_mask"].device)
        ones = torch.ones(len(token_ids), 1, dtype=state["attention_mask"].dtype, device=token_ids.device)
        return self._run({"input_ids": token_ids[:, None], "attention_mask": ones}, state)

    def reorder(self, state, index):
        index = torch.as_tensor(index, dtype=torch.long, device=state["attention_mask"].device)
        # Every tensor of the state is batch-first (``next_position`` too: Qwen keeps one position a row).
        return {key: _reorder_cache(value, index) if key == "cache" else value[index] for key, value in state.items()}

    def decode(self, token_ids):
        ids = [int(i) for i in token_ids]
        if self.eos_token_id in ids:
            ids = ids[: ids.index(self.eos_token_id)]
        return self.tokenizer.decode(ids, skip_special_tokens=True).strip()

    def token_id(self, word):
        ids = self.tokenizer(word, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ValueError(f"the tokenizer turns {word!r} into no token.")
        return int(ids[0])

    # -- fine-tuning members -------------------------------------------
    #: LoRA's targets in the language model, as the official Lavender code (llama-recipes' PEFT defaults).
    default_lora_targets = ("q_proj", "v_proj")

    def with_model(self, model):
        return type(self)(model, self.processor, self._image_token_given)

    @property
    def _config(self):
        return self.model.config

    @property
    def image_token_id(self):
        config = self._config
        token = getattr(config, "image_token_id", None)
        token = getattr(config, "image_token_index", None) if token is None else token
        if token is None:
            raise ValueError(f"{type(self.model).__name__}'s config has no image_token_id (image_token_index): "
                             "cannot tell where the image tokens are.")
        return int(token)

    @property
    def image_grid(self):
        vision = self._config.vision_config
        side = int(vision.image_size) // int(vision.patch_size)
        return side, side

    @property
    def _n_image_tokens(self):
        rows, columns = self.image_grid
        # LLaVA's "full" feature strategy keeps the vision tower's CLS feature in front of the patches.
        return rows * columns + (getattr(self._config, "vision_feature_select_strategy", "default") == "full")

    @property
    def n_heads(self):
        attention = self.layers[0].self_attn
        return int(attention.q_proj.out_features // attention.head_dim)

    def _check_prompts(self, prompts):
        for prompt in prompts:
            if prompt.count(self.image_token) != 1:
                raise ValueError(f"the prompt {prompt!r} must hold the image placeholder {self.image_token!r} "
                                 "exactly once: one image a sample (several images are not supported).")

    def caption_batch(self, images, prompts, captions):
        """Teacher-forcing rows ``prompt caption <end>`` with the caption's words located by token offsets.

        Prompt and caption are tokenised together, as generation continues
        the prompt: a space joins them unless the prompt ends in one. The
        processor expands the image placeholder into the image tokens in the
        string before tokenising, so the caption is the last ``len(caption)``
        characters of that expanded string; tokens overlapping them are the
        caption's, and each goes to the word it overlaps most.
        """
        from ..utils.images import pil_from_array

        prompts = _prompt_list(prompts, len(images))
        self._check_prompts(prompts)
        for prompt in prompts:
            self._check_prompt(prompt)
        images = [np.asarray(image) for image in images]
        self._check_caption_images(images)
        captions = [str(c).strip() for c in captions]
        if any(self.image_token in c for c in captions):
            raise ValueError(f"a caption holds the image placeholder {self.image_token!r}; only the prompt may.")
        if not getattr(self.tokenizer, "is_fast", False):
            raise ValueError(f"{type(self.tokenizer).__name__} is a slow tokenizer without token offsets; "
                             "LavenderTuner locates caption words by offsets: load the processor with use_fast=True.")
        texts = [p + ("" if p[-1:].isspace() else " ") + c for p, c in zip(prompts, captions)]
        batch = self.processor(images=self._processor_images([pil_from_array(image) for image in images]),
                               text=texts, return_offsets_mapping=True)
        image_token = self.image_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_token_id
        rows, targets, words = [], [], []
        for i, (text, caption) in enumerate(zip(texts, captions)):
            ids, offsets = list(batch["input_ids"][i]), [tuple(o) for o in batch["offset_mapping"][i]]
            found = ids.count(image_token)
            self._check_image_count(i, found)
            end = self._expanded_end(text, found, offsets)
            if max(e for _, e in offsets) != end:
                raise ValueError("the tokenizer's offsets do not end where the caption ends; LavenderTuner needs a "
                                 "fast tokenizer whose offsets index the text it was given.")
            start = end - len(caption)
            caption_tokens = [p for p, (s, e) in enumerate(offsets) if e > s and e > start]
            spans = [(m.group().lower(), m.start() + start, m.end() + start) for m in WORD.finditer(caption)]
            positions = {}
            for p in caption_tokens:
                s, e = offsets[p]
                overlap = [min(e, we) - max(s, ws) for _, ws, we in spans]
                if overlap and max(overlap) > 0:
                    positions.setdefault(int(np.argmax(overlap)), []).append(p)
            words.append([(spans[k][0], found_at) for k, found_at in sorted(positions.items())])
            target = [False] * len(ids)
            for p in caption_tokens:
                target[p] = True
            if ids[-1] != self.eos_token_id:
                ids, target = ids + [self.eos_token_id], target + [True]
            target[-1] = True
            rows.append(ids)
            targets.append(target)
        width = max(map(len, rows))
        inputs = {"input_ids": torch.full((len(rows), width), pad, dtype=torch.long),
                  "attention_mask": torch.zeros(len(rows), width, dtype=torch.long),
                  "target": torch.zeros(len(rows), width, dtype=torch.bool)}
        for i, (ids, target) in enumerate(zip(rows, targets)):
            inputs["input_ids"][i, :len(ids)] = torch.as_tensor(ids)
            inputs["attention_mask"][i, :len(ids)] = 1
            inputs["target"][i, :len(ids)] = torch.as_tensor(target)
        inputs.update(self._caption_images(batch))
        return inputs, words

    def _check_caption_images(self, images):
        odd = [i for i, image in enumerate(images) if image.shape[0] != image.shape[1]]
        if odd:
            raise ValueError(f"image {odd[0]} is {images[odd[0]].shape[0]} x {images[odd[0]].shape[1]} pixels: the "
                             "processor centre-crops images that are not square, so the image tokens would cover "
                             "less than the teacher's maps. Pad or crop the images to squares first.")

    def _check_image_count(self, row, found):
        n_image = self._n_image_tokens
        if found != n_image:
            raise ValueError(f"row {row} holds {found} image tokens where the model reads {n_image} "
                             f"({self.image_grid[0]} x {self.image_grid[1]} patches): the processor and the "
                             "model's vision config disagree.")

    def _expanded_end(self, text, found, offsets):
        """Where the caption ends in the string the processor tokenised (it expands the placeholder there)."""
        return len(text) + (found - 1) * len(self.image_token)

    @staticmethod
    def _stacked(values):
        return (torch.stack([torch.as_tensor(np.asarray(v)) for v in values]) if isinstance(values, (list, tuple))
                else torch.as_tensor(np.asarray(values)))

    def _caption_images(self, batch):
        """The image tensors of a caption batch, batch-first (the tuner cuts them by rows)."""
        return {"pixel_values": self._stacked(batch["pixel_values"])}

    def _teacher_inputs(self, inputs):
        """The model's keyword arguments for a teacher-forced forward of ``inputs`` (no cache)."""
        mask = inputs["attention_mask"]
        return {"input_ids": inputs["input_ids"], "pixel_values": inputs["pixel_values"].to(self.lm_head.weight.dtype),
                "attention_mask": mask, "position_ids": (mask.long().cumsum(-1) - 1).clamp(min=0)}

    def _image_keys(self, inputs):
        """Each row's sequence positions of the image grid's tokens in raster order, (B, rows * columns)."""
        ids = inputs["input_ids"]
        n_image_tokens = self._n_image_tokens
        image = ids == self.image_token_id
        if not bool((image.sum(1) == n_image_tokens).all()):
            raise ValueError(f"every row must hold {n_image_tokens} image tokens; got {image.sum(1).tolist()}.")
        n_patches = self.image_grid[0] * self.image_grid[1]
        return image.nonzero()[:, 1].reshape(len(ids), n_image_tokens)[:, n_image_tokens - n_patches:]

    def _attention_module(self, index):
        attention = self.layers[int(index)].self_attn
        _check_attention_module(attention, self._config.get_text_config(), self._rotation(attention))
        return attention

    def _rotation(self, attention):
        """``rotate(q, k, cos, sin) -> (q, k)`` as ``attention`` rotates its queries and keys, or None."""
        return getattr(sys.modules[type(attention).__module__], "apply_rotary_pos_emb", None)

    def _attention_captures(self, inputs, attention_layers, attention_rows):
        """One capture a chosen layer, each attached to its module: (captures, hook handles)."""
        text_config = self._config.get_text_config()
        plan = _ImageAttentionPlan(inputs["input_ids"], inputs["attention_mask"], attention_rows,
                                   self._image_keys(inputs), getattr(text_config, "sliding_window", None))
        captures, handles = [], []
        for index in attention_layers:
            attention = self._attention_module(index)
            captures.append(_ImageAttentionCapture(plan, self._rotation(attention)))
            handles += captures[-1].attach(attention)
        return captures, handles

    def word_token_ids(self, word):
        found = set()
        for spelling in (word, " " + word):
            ids = self.tokenizer(spelling, add_special_tokens=False)["input_ids"]
            if len(ids) == 1 and ids[0] != self.tokenizer.unk_token_id:
                found.add(int(ids[0]))
        return sorted(found)

    def teacher_forced(self, inputs, attention_layers=None, attention_rows=None):
        """Logits of the rows and, for ``attention_layers``, the chosen queries' attention to the image tokens.

        The model runs as it is (its own attention implementation, SDPA by
        default). Hooks on each chosen layer's attention module keep the
        outputs of its query and key projections (after any LoRA hooks on
        them, which were registered first) and, once the module has run,
        rotate them as it does, take each chosen query's log-sum-exp over
        the keys it may attend to (:func:`skicml.ops.row_logsumexp`, an
        ``(N, T)`` block) and the probabilities of the image keys from it
        (:func:`skicml.ops.subblock_attention_probs`): exact, differentiable,
        and never the ``(T, T)`` matrix that eager attention keeps for the
        backward pass in every layer.
        """
        handles, captures = [], []
        try:
            if attention_layers is not None:
                captures, handles = self._attention_captures(inputs, attention_layers, attention_rows)
            out = self.model(**self._teacher_inputs(inputs), use_cache=False, return_dict=True)
        finally:
            for handle in handles:
                handle.remove()
        if attention_layers is None:
            return out.logits, None
        return out.logits, torch.stack([capture.probabilities for capture in captures], dim=1)


def _check_attention_module(attention, text_config, rotate):
    """Refuse attention modules whose probabilities are not ``softmax(scaling q k^T)`` of their projections."""
    missing = [name for name in ("q_proj", "k_proj", "head_dim", "scaling") if not hasattr(attention, name)]
    if missing:
        raise TypeError(f"{type(attention).__name__} lacks {missing}: LavenderTuner reads the text-to-image "
                        "attention of Llama-style attention modules (q_proj, k_proj, rotary embeddings).")
    if getattr(text_config, "attn_logit_softcapping", None) is not None:
        raise TypeError(f"{type(attention).__name__} soft-caps its attention scores, which the log-sum-exp route "
                        "does not reproduce.")
    if rotate is None:
        raise TypeError(f"found no apply_rotary_pos_emb beside {type(attention).__name__}: cannot rotate the "
                        "recomputed queries and keys as the model does.")


class _ImageAttentionPlan:
    """Which queries and keys one forward's captures read, shared by its layers.

    ``rows`` (N, 2) are (sample, position) pairs. Each sample's rows are
    gathered into a padded (B, n_max) block of query positions, so that the
    keys are never copied per row; ``allowed`` holds the causal, padding and
    sliding-window mask of those queries, and ``image_keys`` the positions
    of each sample's image patches in raster order (a leading CLS feature
    left out).
    """

    def __init__(self, ids, mask, rows, image_keys, sliding_window):
        batch, width = ids.shape
        self.rows = rows
        counts = torch.bincount(rows[:, 0], minlength=batch)
        self.slot = torch.arange(len(rows), device=rows.device) - (counts.cumsum(0) - counts)[rows[:, 0]]
        n_max = max(int(counts.max()) if len(rows) else 0, 1)
        # Unused slots query the sample's last real position: any real row keeps the log-sum-exp finite.
        last = mask.long().sum(1).clamp(min=1) - 1
        self.queries = last[:, None].repeat(1, n_max)
        self.queries[rows[:, 0], self.slot] = rows[:, 1]
        keys = torch.arange(width, device=ids.device)
        allowed = (keys <= self.queries[..., None]) & mask.bool()[:, None, :]
        if sliding_window is not None:
            allowed &= keys > self.queries[..., None] - int(sliding_window)
        self.allowed = allowed[:, None]  # (B, 1, n_max, T)
        self.image_keys = image_keys


class _ImageAttentionCapture:
    """One layer's attention of the plan's queries to the image tokens, (N, heads, n_patches), by hooks."""

    def __init__(self, plan, rotate):
        self.plan = plan
        self.rotate = rotate
        self.projected = {}
        self.probabilities = None

    def attach(self, attention):
        def keep(name):
            def hook(module, args, output):
                self.projected[name] = output
            return hook

        return [attention.q_proj.register_forward_hook(keep("q")), attention.k_proj.register_forward_hook(keep("k")),
                attention.register_forward_hook(self._read, with_kwargs=True)]

    def _read(self, module, args, kwargs, output):
        plan = self.plan
        cos, sin = kwargs["position_embeddings"] if "position_embeddings" in kwargs else args[1]
        head_dim = module.head_dim
        batch, width = self.projected["q"].shape[:2]
        q = self.projected["q"].view(batch, width, -1, head_dim)
        k = self.projected["k"].view(batch, width, -1, head_dim)
        self.projected.clear()
        if hasattr(module, "q_norm"):  # Qwen3-style per-head norms before the rotation
            q, k = module.q_norm(q), module.k_norm(k)
        q, k = self.rotate(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # grouped-query attention: head h reads h // groups
        # Float32 for the normaliser and the exponent: a bfloat16 log-sum-exp is off by about 1%.
        q, k = q.float(), k.float()
        n_max = plan.queries.shape[1]
        chosen = q.gather(2, plan.queries[:, None, :, None].expand(-1, q.shape[1], n_max, head_dim))
        lse = row_logsumexp(chosen, k, float(module.scaling), plan.allowed)
        image_keys = k.gather(2, plan.image_keys[:, None, :, None].expand(-1, k.shape[1], -1, head_dim))
        probabilities = subblock_attention_probs(chosen, image_keys, lse, float(module.scaling))
        # Two advanced indices split by a slice put their dimension first: (N, heads, n_patches).
        self.probabilities = probabilities[plan.rows[:, 0], :, plan.slot]
