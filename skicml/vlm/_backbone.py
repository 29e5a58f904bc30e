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

:class:`TinyVLM` follows the protocol through :func:`as_backbone`;
:class:`HFLlavaAdapter` wraps a Hugging Face LLaVA-style model and its
processor; :class:`CallableAdapter` builds a backbone from functions.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ._model import TinyVLM
from ._text import WordTokenizer

__all__ = ["CallableAdapter", "HFLlavaAdapter", "as_backbone", "check_backbone"]

PROTOCOL = ("layers", "mlp_of", "final_norm", "lm_head", "hidden_size", "eos_token_id", "build_inputs",
            "prefill", "step", "reorder", "decode")
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


def as_backbone(backbone):
    """A protocol object for ``backbone``: a :class:`TinyVLM`, a shipped model's name, or a protocol object."""
    if isinstance(backbone, str):
        from ._pretrained import load_tiny_vlm

        backbone = load_tiny_vlm(backbone)
    if isinstance(backbone, TinyVLM):
        return _TinyVLMBackbone(backbone)
    return check_backbone(backbone)


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
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.tokenizer.padding_side = "left"
        self.image_token = image_token or getattr(processor, "image_token", None) or "<image>"
        self._check_image_token(model, processor, image_token)
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

    def build_inputs(self, images, prompts, with_image=True):
        prompts = _prompt_list(prompts, len(images))
        for prompt in prompts:
            if self.image_token not in prompt:
                raise ValueError(f"the prompt {prompt!r} has no image placeholder {self.image_token!r}; "
                                 "VISTA's negative context is the prompt with it cut out.")
        if with_image:
            from ..utils.images import pil_from_array

            pictures = [pil_from_array(np.asarray(image)) for image in images]
            batch = self.processor(images=pictures, text=prompts, padding=True, return_tensors="pt")
        else:
            texts = [_without_placeholder(p, self.image_token) for p in prompts]
            batch = self.tokenizer(texts, padding=True, return_tensors="pt")
        return self._to_model(batch)

    def _run(self, inputs, state):
        mask = inputs["attention_mask"]
        # Left padding: a row's positions count its real tokens only (padding is masked anyway).
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        if state is not None:
            positions = state["next_position"][:, None] + positions
            mask = torch.cat([state["attention_mask"], mask], dim=1)
        out = self.core(**{**inputs, "attention_mask": mask}, position_ids=positions,
                        past_key_values=None if state is None else state["cache"], use_cache=True,
                        return_dict=True)
        state = {"cache": out.past_key_values, "attention_mask": mask, "next_position": positions[:, -1] + 1}
        return out.last_hidden_state[:, -1], state

    def prefill(self, inputs):
        return self._run(dict(inputs), None)

    def step(self, token_ids, state):
        token_ids = token_ids.to(state["attention_mask"].device)
        ones = torch.ones(len(token_ids), 1, dtype=state["attention_mask"].dtype, device=token_ids.device)
        return self._run({"input_ids": token_ids[:, None], "attention_mask": ones}, state)

    def reorder(self, state, index):
        index = torch.as_tensor(index, dtype=torch.long, device=state["attention_mask"].device)
        return {"cache": _reorder_cache(state["cache"], index), "attention_mask": state["attention_mask"][index],
                "next_position": state["next_position"][index]}

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
