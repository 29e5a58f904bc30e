"""``CLIPEmbedder``: images or captions to CLIP embeddings, through open_clip.

open_clip is imported only when a model is loaded (the ``clip`` extra).
``pretrained`` is a shipped model name, a file on this machine, or one of
open_clip's pretrained tags for ``model_name``: a tag is resolved through
open_clip's own table by :mod:`skicml._weights` (read from the Hugging Face
cache, or downloaded once into it), and open_clip is only ever handed the
local file.
"""

from __future__ import annotations

import collections
import hashlib
import json
import numbers
import os
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_memory, validate_data

from .. import _weights
from ..base import TorchEstimatorMixin, progress, seed_from_random_state, seeded, warn_user
from ..utils.param_validation import HasMethods, Integral, Interval, StrOptions, fit_context, shared_constraints
from ..utils.images import (
    check_captions,
    check_images,
    check_pixel_rows,
    image_input_kind,
    images_from_rows,
    out_of_range_row_checks,
    pil_from_array,
    preprocess_images,
)
from ._model import build_clip, import_open_clip, is_skicml_checkpoint
from ._model import is_torchscript_archive as _is_torchscript

__all__ = ["CLIPEmbedder", "DEFAULT_CLIP"]

#: Registry name of the shipped tiny CLIP, loaded when no model is named.
DEFAULT_CLIP = "tiny-clip-shapes"
# What ``pretrained`` says to ask for random weights of a named architecture.
_RANDOM = "random"

_PRECISIONS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}
_MODALITIES = ("image", "text")
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm")
# Architectures OpenAI trained with QuickGELU; open_clip names them "<arch>-quickgelu".
_OPENAI_ARCHS = ("RN50", "RN101", "RN50x4", "RN50x16", "RN50x64", "ViT-B-32", "ViT-B-16", "ViT-L-14",
                 "ViT-L-14-336")

# Loaded models shared by the estimators of this process (clones, refits,
# the embedders of a grid search), keyed by everything that defines them.
_MODEL_CACHE: collections.OrderedDict = collections.OrderedDict()
_MODEL_CACHE_SIZE = 2


class _Loaded:
    """A loaded model with what encoding needs beside it."""

    def __init__(self, model, tokenizer_spec, fingerprint, info):
        self.model = model
        self.tokenizer_spec = tokenizer_spec
        self.fingerprint = fingerprint
        self.info = info


def _fingerprint(state_dict):
    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(state_dict):
        tensor = state_dict[name].detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def _file_key(path):
    stat = os.stat(path)
    return (os.path.abspath(path), stat.st_mtime_ns, stat.st_size)


def _open_clip_tag(model_name, pretrained):
    """Whether ``pretrained`` is one of open_clip's download tags."""
    try:
        open_clip = import_open_clip()
        tags = open_clip.list_pretrained_tags_by_model(model_name) if model_name else []
        every = {tag for _, tag in open_clip.list_pretrained()}
    except ImportError:
        return False
    return pretrained in tags or pretrained in every


def _open_clip_models(tag):
    """The open_clip architectures ``tag`` is a pretrained tag of."""
    try:
        return import_open_clip().list_pretrained_models_by_tag(tag)
    except ImportError:
        return []


def _make_tokenizer(spec):
    """A tokenizer from its picklable spec: ("simple", context_length),
    ("open_clip", model_name) or ("hub", model_name)."""
    open_clip = import_open_clip()
    kind, arg = spec
    if kind == "simple":
        return open_clip.tokenizer.SimpleTokenizer(context_length=arg)
    if kind == "hub":
        raise ValueError(
            f"model_name={arg!r} uses a Hugging Face tokenizer, which would be downloaded; skicml never "
            "downloads. Save the model with its tokenizer files in a folder and pass "
            "model_name='local-dir:<folder>'."
        )
    return open_clip.get_tokenizer(arg)


class CLIPEmbedder(ClassNamePrefixFeaturesOutMixin, TorchEstimatorMixin, TransformerMixin, BaseEstimator):
    """Embed images or captions with a CLIP model (open_clip).

    A transformer from images (``modality="image"``) or captions
    (``modality="text"``) to the raw CLIP embeddings the W-CLIP paper
    whitens: ``model.encode_image`` / ``model.encode_text`` in eval mode
    under :func:`torch.inference_mode`, in batches, as a float array of shape
    ``(n_samples, embed_dim)``. ``fit`` loads the model and learns nothing.

    With no ``model_name``, ``model_config`` or ``pretrained``, the tiny
    CLIP shipped with skicml is loaded (a toy model trained on
    :func:`skicml.datasets.make_shape_scenes`; it knows shapes, colours and
    positions, nothing else). For a real CLIP, pass an open_clip
    architecture and one of its pretrained tags, as open_clip names them,
    e.g. ``model_name="ViT-B-32", pretrained="laion2b_s34b_b79k"``, or
    ``model_name="ViT-L-14-quickgelu", pretrained="openai"`` for the
    paper's OpenAI ViT-L/14: the weights are read from the Hugging Face
    cache, or downloaded once into it (never with ``HF_HUB_OFFLINE=1`` or
    ``skicml.set_config(allow_download=False)``; ``skicml download
    ViT-B-32:laion2b_s34b_b79k`` fetches them ahead of time; see
    :ref:`published_models`). A checkpoint file on this machine works too.

    Parameters
    ----------
    model_name : str or None, default=None
        An open_clip architecture (``open_clip.list_models()``, e.g.
        ``"ViT-B-32"``, ``"ViT-L-14-quickgelu"``), or ``"local-dir:<folder>"``
        for a folder holding ``open_clip_config.json`` and the weights (then
        ``pretrained`` must be None). None takes the architecture from a
        skicml weights file or from ``model_config``. OpenAI's weights were
        trained with QuickGELU: use the ``-quickgelu`` names with them (an
        OpenAI TorchScript archive is detected and built correctly whatever
        the name).
    pretrained : str, path-like or None, default=None
        A shipped model name (see :func:`skicml._weights.available_weights`),
        or the path of a checkpoint on this machine: a skicml weights file
        (which carries its architecture), an open_clip/OpenAI state dict
        (``.pt``, ``.pth``, ``.bin``, ``.safetensors``, for ``model_name``
        or ``model_config``), or an OpenAI TorchScript archive; or
        ``"random"`` for random weights of ``model_name`` or
        ``model_config`` (for tests and controls). None loads the shipped
        tiny CLIP when neither ``model_name`` nor ``model_config`` is set,
        gives random weights to a ``model_config`` (a custom architecture
        has no published weights), and is refused with a ``model_name``:
        random weights of a named architecture would give meaningless
        embeddings, so they are built only when asked for. With
        ``model_name``, one of open_clip's pretrained tags for it
        (``open_clip.list_pretrained_tags_by_model(model_name)``, e.g.
        ``"laion2b_s34b_b79k"``, ``"openai"``) loads its published weights
        with the tag's preprocessing, from the cache or downloaded once into
        it (see the class description); a tag without ``model_name`` raises
        :class:`FileNotFoundError`.
    model_config : dict or None, default=None
        A custom architecture, ``{"embed_dim", "vision_cfg", "text_cfg"}``
        as in open_clip's ``model_configs/*.json``.
    modality : {"image", "text"}, default="image"
        What :meth:`transform` reads.
    normalize : bool, default=False
        L2-normalise the embeddings. The W-CLIP paper's code whitens raw
        (unnormalised) features; its demo uses normalised ones.
    batch_size : int, default=64
        Images or captions per forward pass.
    device : str or torch.device, default="auto"
    precision : {"fp32", "fp16", "bf16", "fp64"}, default="fp32"
        Weights and compute dtype. Embeddings are returned as float32, or
        float64 with ``"fp64"``.
    quick_gelu : bool or None, default=None
        Force QuickGELU activations on (True) for an architecture named
        without ``-quickgelu``; None keeps the architecture's own.
    image_shape : tuple of int or None, default=None
        The 2-D array path of ``modality="image"``: rows of a 2-D array are
        flattened images of this ``(height, width)`` or ``(height, width,
        channels)`` shape. None reads rows of ``3 * s * s`` values as
        ``s x s`` RGB images and rows of ``s * s`` values as grey ones
        (``s`` the model's image size), and any other row as a one-pixel
        high grey strip stretched to the model's input size. A ``(height,
        width)`` shape also tells a 3-D array of grey images ``(n, height,
        width)`` whose width is 1, 3 or 4 from a single colour image.
        Rows are read like images: uint8 (integer) rows as 0..255 pixel
        values, float rows as intensities in [0, 1] (others are refused).
    memory : None, str or joblib.Memory, default=None
        Cache of the embeddings, as in :class:`~sklearn.pipeline.Pipeline`:
        transforming the same inputs with the same model again (a refit of
        the whitening, a grid search) reads them from the cache. The key is
        the model's weight fingerprint, the settings and the inputs (file
        paths by path, modification time and size).
    random_state : int, RandomState instance or None, default=None
        Seeds the random weights (``pretrained="random"``, or None with
        ``model_config``).
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.
        Show a progress bar of the batches of :meth:`transform` on stderr
        when positive (kept once done when above 1).

    Attributes
    ----------
    model_ : torch.nn.Module
        The open_clip model, in eval mode.
    embed_dim_ : int
        Width of the embeddings.
    model_fingerprint_ : str
        Hash of the model's weights: embeddings from different fingerprints
        must not be whitened together.
    model_info_ : dict
        Where the model came from (architecture, weights, provenance).
    preprocess_cfg_ : dict
        open_clip's image preprocessing settings (size, mean, std,
        interpolation, resize mode).
    context_length_ : int
        Tokens per caption (longer captions are truncated).
    n_features_in_ : int
        Width of the rows seen by ``fit`` on the 2-D array path only.

    See Also
    --------
    WhitenedCLIPScorer : Whitened likelihoods of images and captions.

    Notes
    -----
    Image inputs are PIL images, file paths, or arrays of shape ``(n, H, W,
    C)`` with ``C`` in 1, 3 or 4 (or a list of ``(H, W)``, ``(H, W, 3)`` or
    ``(H, W, 4)`` arrays). The number of dimensions of an array decides what
    it holds: a 2-D array is rows of flattened images (see ``image_shape``),
    a 3-D numeric array is ``(n, H, W)`` grey images, the same as ``X[...,
    None]``, and a 4-D one is ``(n, H, W, C)``. A 3-D array whose last axis
    has 1, 3 or 4 entries could be a single ``(H, W, C)`` image, so it is
    refused with an error saying what to pass, unless ``image_shape`` is
    its ``(H, W)``.
    PIL images, paths and integer arrays (0-255) go through open_clip's own
    preprocessing, exactly. Float arrays are read as intensities in [0, 1]
    (values outside it, NaN or infinity are refused: divide 0-255 floats by
    255, or pass them as uint8) and preprocessed in torch (same resize mode,
    bicubic with antialiasing, same normalisation), which matches open_clip exactly when the images
    already have the model's size and up to interpolation otherwise. Alpha
    channels are dropped, grey images are repeated to three channels.

    Examples
    --------
    >>> from skicml.clip import CLIPEmbedder
    >>> from skicml.datasets import make_shape_scenes
    >>> images, captions, _ = make_shape_scenes(4, random_state=0)
    >>> config = {"embed_dim": 8,
    ...           "vision_cfg": {"image_size": 32, "layers": 1, "width": 16, "patch_size": 8,
    ...                          "head_width": 8},
    ...           "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 16,
    ...                        "heads": 2, "layers": 1}}
    >>> images_out = CLIPEmbedder(model_config=config, random_state=0).fit_transform(images)
    >>> images_out.shape
    (4, 8)
    >>> texts = CLIPEmbedder(model_config=config, modality="text", random_state=0)
    >>> texts.fit_transform(list(captions)).shape
    (4, 8)
    """

    _parameter_constraints = {
        "model_name": [str, None],
        "model_config": [dict, None],
        "modality": [StrOptions(set(_MODALITIES))],
        "normalize": ["boolean"],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "precision": [StrOptions(set(_PRECISIONS))],
        "quick_gelu": ["boolean", None],
        # Its entries are checked in fit: no declared rule reads inside a tuple.
        "image_shape": ["array-like", None],
        # What sklearn.utils.validation.check_memory accepts.
        "memory": [None, str, HasMethods(["cache"])],
        **shared_constraints("pretrained", "device", "random_state", "verbose"),
    }

    def __init__(self, model_name=None, pretrained=None, model_config=None, modality="image", normalize=False,
                 batch_size=64, device="auto", precision="fp32", quick_gelu=None, image_shape=None, memory=None,
                 random_state=None, verbose="auto"):
        self.model_name = model_name
        self.pretrained = pretrained
        self.model_config = model_config
        self.modality = modality
        self.normalize = normalize
        self.batch_size = batch_size
        self.device = device
        self.precision = precision
        self.quick_gelu = quick_gelu
        self.image_shape = image_shape
        self.memory = memory
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------
    # parameters and model loading
    # ------------------------------------------------------------------
    def _check_image_shape(self):
        if self.image_shape is not None:
            shape = tuple(self.image_shape)
            if len(shape) not in (2, 3) or any(isinstance(s, bool) or not isinstance(s, numbers.Integral)
                                               or s < 1 for s in shape) or (len(shape) == 3 and shape[2]
                                                                            not in (1, 3, 4)):
                raise ValueError(
                    f"image_shape={self.image_shape!r}; expected (height, width) or (height, width, "
                    "channels) with 1, 3 or 4 channels."
                )

    def _model_key(self, seed):
        """Everything that defines the loaded model, hashable; plus how to load it."""
        name, pretrained, config = self.model_name, self.pretrained, self.model_config
        config_key = json.dumps(config, sort_keys=True, default=str) if config is not None else None
        if name is not None:
            _weights.check_local(name, "model_name", instead="model_name='local-dir:<folder>'")
        if name is not None and name.startswith("local-dir:"):
            if pretrained is not None or config is not None:
                raise ValueError(
                    "model_name='local-dir:...' carries its own config and weights; leave pretrained "
                    "and model_config as None."
                )
            folder = name[len("local-dir:"):]
            if not os.path.isdir(folder):
                raise FileNotFoundError(
                    f"model_name={name!r}: no folder {folder!r} on this machine. It must hold "
                    "open_clip_config.json and the weights (open_clip_model.safetensors)."
                )
            stamp = tuple(_file_key(os.path.join(folder, f)) for f in sorted(os.listdir(folder))
                          if os.path.isfile(os.path.join(folder, f)))
            return ("local-dir", name, stamp, self.quick_gelu), None
        if pretrained is None and name is None and config is None:
            pretrained = DEFAULT_CLIP
        random = isinstance(pretrained, str) and pretrained == _RANDOM
        if random and name is None and config is None:
            raise ValueError(
                f"pretrained={_RANDOM!r} needs an architecture: pass model_name (an open_clip "
                "architecture such as 'ViT-B-32') or model_config."
            )
        if pretrained is None and name is not None:
            self._check_builtin(name)
            raise ValueError(
                f"model_name={name!r} names an architecture but no weights, and random weights would give "
                "meaningless embeddings. Pass pretrained=<path of a checkpoint on this machine> (skicml "
                f"never downloads), e.g. CLIPEmbedder(model_name={name!r}, "
                f"pretrained='/data/{name}.safetensors'), or pretrained={_RANDOM!r} to ask for random weights."
            )
        if pretrained is None or random:
            return ("random", name, config_key, self.quick_gelu, seed), None
        key = os.fspath(pretrained)
        entry = _weights.shipped_weights(key)
        if entry is not None:
            return ("shipped", key, entry.sha256, name, config_key, self.quick_gelu), None
        if os.path.isfile(key):
            return ("file", _file_key(key), name, config_key, self.quick_gelu), key
        published = (_weights.published_weights(key, model_name=name)
                     if name is not None and config is None else None)
        if published is not None:
            # open_clip's own table says where the tag lives; the file is fetched once, then local.
            path = published.fetch()
            return ("published", published.name, _file_key(path), self.quick_gelu), path
        if key == DEFAULT_CLIP:
            raise FileNotFoundError(
                f"The shipped tiny CLIP ({DEFAULT_CLIP!r}) is not part of this installation yet. Train "
                "it with `skicml pretrain tiny-clip --export tiny_clip.pt` and pass "
                "pretrained='tiny_clip.pt', or pass model_name and pretrained=<checkpoint path> of "
                "your own CLIP."
            )
        if _open_clip_tag(name, key):
            architectures = ", ".join(_open_clip_models(key)[:6]) or "see open_clip.list_pretrained()"
            _weights.check_local(
                key, download_tag="an open_clip download tag",
                instead=(f"model_name with it, an open_clip architecture the tag belongs to ({architectures}), "
                         f"e.g. CLIPEmbedder(model_name='ViT-B-32', pretrained={key!r})")
                if name is None or config is not None else
                f"an architecture it belongs to ({architectures}) as model_name, or a checkpoint path",
            )
        _weights.check_local(
            key, instead=f"its local path, e.g. CLIPEmbedder(model_name={(name or 'ViT-L-14-quickgelu')!r}, "
                         "pretrained='/path/to/file.pt')",
        )
        names = ", ".join(sorted(_weights.available_weights())) or "none registered"
        raise FileNotFoundError(
            f"pretrained={key!r} is neither a file on this machine nor a shipped model ({names}). "
            "skicml never downloads weights: pass the path of a checkpoint (.pt, .pth, .bin, "
            f".safetensors or an OpenAI TorchScript archive), or {_RANDOM!r} for random weights."
        )

    def _load(self, seed):
        key, path = self._model_key(seed)
        full_key = (key, str(self._device()), self.precision)
        if full_key in _MODEL_CACHE:
            _MODEL_CACHE.move_to_end(full_key)
            return _MODEL_CACHE[full_key]
        loaded = self._build(key, path, seed)
        model = loaded.model.eval().requires_grad_(False)
        fingerprint = _fingerprint(model.state_dict())
        model = model.to(device=self._device(), dtype=_PRECISIONS[self.precision])
        loaded.model, loaded.fingerprint = model, fingerprint
        _MODEL_CACHE[full_key] = loaded
        while len(_MODEL_CACHE) > _MODEL_CACHE_SIZE:
            _MODEL_CACHE.popitem(last=False)
        return loaded

    def _build(self, key, path, seed):
        open_clip = import_open_clip()
        kind, name, config = key[0], self.model_name, self.model_config
        force = {"force_quick_gelu": True} if self.quick_gelu else {}
        if kind == "local-dir":
            model = open_clip.create_model(name, pretrained=None, pretrained_text=False, **force)
            return _Loaded(model, ("open_clip", name), None,
                           {"architecture": name, "weights": name})
        if kind == "random":
            with seeded(seed):
                if config is not None:
                    model = build_clip(self._config_with_gelu(config))
                else:
                    self._check_builtin(name)
                    model = open_clip.create_model(name, pretrained=None, pretrained_text=False, **force)
            return _Loaded(model, self._tokenizer_for(model, name, config), None,
                           {"architecture": name or "model_config", "weights": f"random (seed {seed})"})
        if kind == "shipped":
            return self._from_skicml_file(key[1])
        if kind == "published":
            return self._from_published(key[1], path)
        # a local file
        if not _is_torchscript(path) and is_skicml_checkpoint(path):
            return self._from_skicml_file(path)
        if _is_torchscript(path):
            with warnings.catch_warnings():  # torch 2.14 deprecates the torch.jit.load open_clip calls
                warnings.filterwarnings("ignore", message=".*torch.jit.load.*", category=FutureWarning)
                model = open_clip.load_openai_model(path, precision="fp32", device="cpu")
            return _Loaded(model, ("simple", int(model.context_length)), None,
                           {"architecture": "OpenAI CLIP (TorchScript archive, QuickGELU)",
                            "weights": os.path.abspath(path)})
        if config is None and name is None:
            raise ValueError(
                f"pretrained={path!r} is a plain state dict, which does not say its architecture: "
                "pass model_name (an open_clip architecture such as 'ViT-B-32' or "
                "'ViT-L-14-quickgelu') or model_config."
            )
        self._warn_quick_gelu(name, path)
        if config is not None:
            model = build_clip(self._config_with_gelu(config))
            open_clip.load_checkpoint(model, path)
        else:
            self._check_builtin(name)
            model = open_clip.create_model(name, pretrained=path, pretrained_text=False, **force)
        return _Loaded(model, self._tokenizer_for(model, name, config), None,
                       {"architecture": name or "model_config", "weights": os.path.abspath(path)})

    def _config_with_gelu(self, config):
        config = dict(config)
        if self.quick_gelu:
            config["quick_gelu"] = True
        return config

    def _from_skicml_file(self, source):
        """A shipped model or a skicml weights file, which carries its architecture."""

        def build(config):
            if self.model_config is not None or self.model_name is not None:
                raise ValueError(
                    f"pretrained={source!r} is a skicml weights file, which carries its own architecture; "
                    "leave model_name and model_config as None."
                )
            # float32 whatever the file's precision: load_state_dict casts into it.
            return build_clip(config["model_cfg"], config.get("preprocess_cfg"))

        model, config, provenance = _weights.load_module(source, build)
        context = int(config["model_cfg"]["text_cfg"].get("context_length", 77))
        info = {"architecture": config.get("name", "skicml CLIP"), "weights": os.fspath(source),
                "provenance": provenance}
        return _Loaded(model, ("simple", context), None, info)

    def _from_published(self, published_name, path):
        """An open_clip tag's weights, loaded as open_clip's ``create_model(name, pretrained=tag)`` does."""
        open_clip = import_open_clip()
        from open_clip.transform import merge_preprocess_dict

        name = self.model_name
        tag = published_name[len(name) + 1:]
        tag_cfg = open_clip.get_pretrained_cfg(name, tag)
        if _is_torchscript(path):
            loaded = self._build(("file",), path, None)
            model = loaded.model
        else:
            self._check_builtin(name)
            force = {"force_quick_gelu": True} if self.quick_gelu else {}
            model = open_clip.create_model(name, pretrained=path, pretrained_text=False, **force)
            gelu = bool(self.quick_gelu) or bool((open_clip.get_model_config(name) or {}).get("quick_gelu"))
            if bool(tag_cfg.get("quick_gelu", False)) != gelu:
                warn_user(
                    f"pretrained={tag!r} was trained with quick_gelu={bool(tag_cfg.get('quick_gelu'))} but "
                    f"model_name={name!r} has quick_gelu={gelu}, which gives silently different features; "
                    f"use model_name='{name}-quickgelu' (or quick_gelu=True)" if not gelu else
                    f"pretrained={tag!r} was trained with GELU but model_name={name!r} uses QuickGELU.",
                    UserWarning,
                )
        # The tag's preprocessing (mean, std, interpolation, resize mode), as open_clip sets it for a tag.
        open_clip.model.set_model_preprocess_cfg(
            model, merge_preprocess_dict(open_clip.get_model_preprocess_cfg(model), tag_cfg))
        entry = _weights.published_weights(tag, model_name=name)
        return _Loaded(model, self._tokenizer_for(model, name, None), None,
                       {"architecture": name, "weights": published_name, "published": published_name,
                        "source": entry.source if entry is not None else "", "path": os.path.abspath(path)})

    @staticmethod
    def _check_builtin(name):
        open_clip = import_open_clip()
        if open_clip.get_model_config(name) is None:
            raise ValueError(
                f"model_name={name!r} is not an open_clip architecture; see open_clip.list_models(), "
                "or pass model_config for a custom one."
            )

    def _warn_quick_gelu(self, name, path):
        if name is None or self.quick_gelu or name.endswith("-quickgelu"):
            return
        if name in _OPENAI_ARCHS and "openai" in os.path.abspath(path).lower():
            warn_user(
                f"pretrained={path!r} looks like OpenAI weights, which were trained with QuickGELU, but "
                f"model_name={name!r} uses GELU and gives silently different features; use "
                f"model_name='{name}-quickgelu' (or quick_gelu=True).",
                UserWarning,
            )

    def _tokenizer_for(self, model, name, config):
        if config is not None:
            return ("simple", int(config.get("text_cfg", {}).get("context_length", 77)))
        open_clip = import_open_clip()
        text_cfg = (open_clip.get_model_config(name) or {}).get("text_cfg", {})
        if text_cfg.get("hf_tokenizer_name") or "siglip" in name.lower():
            return ("hub", name)
        return ("open_clip", name)

    # ------------------------------------------------------------------
    # fit / transform
    # ------------------------------------------------------------------
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X=None, y=None):
        """Load the model (nothing is learned).

        Parameters
        ----------
        X : images, captions, 2-D array or None
            Only validated: on the 2-D array path it sets ``n_features_in_``.
        y : None
            Ignored.

        Returns
        -------
        self : CLIPEmbedder
        """
        self._check_image_shape()
        for stale in ("n_features_in_", "feature_names_in_"):
            if hasattr(self, stale):
                delattr(self, stale)
        if X is not None and self.modality == "image" and image_input_kind(X) == "embedding":
            check_pixel_rows(validate_data(self, X, reset=True, dtype="numeric", ensure_all_finite=True))
        elif X is not None:
            self._check_raw(X)
        seed = seed_from_random_state(self.random_state)
        loaded = self._load(seed)
        self.model_ = loaded.model
        self._tokenizer_spec = loaded.tokenizer_spec
        self.model_fingerprint_ = loaded.fingerprint
        self.model_info_ = dict(loaded.info, fingerprint=loaded.fingerprint)
        open_clip = import_open_clip()
        cfg = dict(open_clip.get_model_preprocess_cfg(self.model_))
        size = cfg.get("size", 224)
        cfg["size"] = tuple(size) if isinstance(size, (list, tuple)) else (int(size), int(size))
        self.preprocess_cfg_ = cfg
        self.embed_dim_ = int(self._probe_dim())
        text = getattr(self.model_, "text", self.model_)
        self.context_length_ = int(getattr(text, "context_length", getattr(self.model_, "context_length", 77)))
        return self

    def _probe_dim(self):
        model = self.model_
        proj = getattr(model, "text_projection", None)
        if isinstance(proj, torch.Tensor):
            return proj.shape[1]
        if isinstance(proj, torch.nn.Linear):
            return proj.out_features
        visual = getattr(model, "visual", None)
        if visual is not None and getattr(visual, "output_dim", None):
            return visual.output_dim
        with torch.inference_mode():
            h, w = self.preprocess_cfg_["size"]
            x = torch.zeros(1, 3, h, w, device=self._device(), dtype=_PRECISIONS[self.precision])
            return model.encode_image(x).shape[1]

    @property
    def _n_features_out(self):
        return self.embed_dim_

    def transform(self, X):
        """Embed images or captions.

        Parameters
        ----------
        X : images, captions or 2-D array
            ``modality="image"``: a list of PIL images, file paths or arrays,
            an array of shape ``(n, H, W, C)`` or ``(n, H, W)`` (grey), or a
            2-D array of flattened images (see ``image_shape``). ``modality="text"``: a list, 1-D
            array or Series of strings.

        Returns
        -------
        ndarray of shape (n_samples, embed_dim)
            float32 (float64 with ``precision="fp64"``).
        """
        check_is_fitted(self, "model_")
        kind, data = self._canonical(X)
        memory = check_memory(self.memory)
        encode = memory.cache(_encode_cached, ignore=["embedder"])
        return encode(self, self.model_fingerprint_, self.modality, bool(self.normalize), self.precision,
                      json.dumps(self.preprocess_cfg_, sort_keys=True, default=str), self.image_shape, kind,
                      data)

    def transform_patches(self, X):
        """Embed images and their patches in the joint space.

        The patch tokens of a Vision Transformer after its final layer norm,
        mapped by the same projection as the pooled embedding, so that a
        patch and a caption compare by cosine as an image and a caption do
        (what ViLAMP's merging of video frames needs).

        Parameters
        ----------
        X : images or 2-D array
            As for :meth:`transform` with ``modality="image"``.

        Returns
        -------
        embeddings : ndarray of shape (n_images, embed_dim)
            What :meth:`transform` returns.
        patches : ndarray of shape (n_images, n_patches, embed_dim)
            The projected patch tokens (L2-normalised with ``normalize``).
        """
        check_is_fitted(self, "model_")
        if self.modality != "image":
            raise ValueError("transform_patches embeds images; this embedder has modality='text'.")
        visual = self.model_.visual
        if not hasattr(visual, "output_tokens"):
            raise ValueError(f"the image tower of this model ({type(visual).__name__}) has no patch tokens; "
                             "transform_patches needs a Vision Transformer.")
        kind, data = self._canonical(X)
        out_dtype = np.float64 if self.precision == "fp64" else np.float32
        pooled, patches = [], []
        previous = visual.output_tokens
        visual.output_tokens = True
        try:
            with torch.inference_mode():
                for batch in self._image_batches(kind, data):
                    batch = batch.to(self._device())
                    if batch.is_floating_point():
                        batch = batch.to(_PRECISIONS[self.precision])
                    embedding, tokens = visual(batch)
                    if visual.proj is not None:
                        tokens = tokens @ visual.proj
                    if self.normalize:
                        embedding = torch.nn.functional.normalize(embedding, dim=-1)
                        tokens = torch.nn.functional.normalize(tokens, dim=-1)
                    pooled.append(embedding.float().cpu().numpy().astype(out_dtype, copy=False))
                    patches.append(tokens.float().cpu().numpy().astype(out_dtype, copy=False))
        finally:
            visual.output_tokens = previous
        if not pooled:
            raise ValueError("X holds no images.")
        return np.concatenate(pooled), np.concatenate(patches)

    # ------------------------------------------------------------------
    # input handling
    # ------------------------------------------------------------------
    def _check_raw(self, X):
        if self.modality == "text":
            check_captions(X)
        else:
            check_images(X, self.image_shape)

    def _canonical(self, X):
        """``(kind, data)`` with data in a form that is cheap to hash."""
        if self.modality == "text":
            return "text", check_captions(X)
        if image_input_kind(X) == "embedding":  # 2-D rows of flattened images (validate_data rejects the rest)
            X = validate_data(self, X, reset=False, dtype="numeric", ensure_all_finite=True)
            check_pixel_rows(X)
            return "flat", np.ascontiguousarray(X)
        items = check_images(X, self.image_shape)
        if isinstance(items, np.ndarray):
            return "array", items
        canon = []
        for item in items:
            if isinstance(item, str):
                canon.append(("path",) + _file_key(item))
            else:
                canon.append(item)
        return "list", canon

    def _encode(self, kind, data):
        model = self.model_
        dtype = _PRECISIONS[self.precision]
        out_dtype = np.float64 if self.precision == "fp64" else np.float32
        if kind == "text":
            tokenizer = self._tokenizer()
            batches = (tokenizer(data[i:i + self.batch_size]) for i in range(0, len(data), self.batch_size))
            encode = model.encode_text
        else:
            batches = self._image_batches(kind, data)
            encode = model.encode_image
        chunks = []
        n_batches = -(-len(data) // self.batch_size)
        batches = progress(batches, verbose=self.verbose, total=n_batches, desc=type(self).__name__,
                           unit="batch")
        with torch.inference_mode():
            for batch in batches:
                batch = batch.to(self._device())
                if batch.is_floating_point():
                    batch = batch.to(dtype)
                features = encode(batch, normalize=bool(self.normalize))
                chunks.append(features.float().cpu().numpy().astype(out_dtype, copy=False))
        if not chunks:
            return np.zeros((0, self.embed_dim_), dtype=out_dtype)
        return np.concatenate(chunks, axis=0)

    def _tokenizer(self):
        tokenizer = getattr(self, "_tokenizer_cache", None)
        if tokenizer is None:
            tokenizer = self._tokenizer_cache = _make_tokenizer(self._tokenizer_spec)
        return tokenizer

    def _image_batches(self, kind, data):
        if kind == "flat":
            images = self._rows_to_images(data)
            for start in range(0, len(images), self.batch_size):
                chunk = images[start:start + self.batch_size]
                yield preprocess_images(chunk, self.preprocess_cfg_, squash=images.shape[1] == 1)
            return
        if kind == "array":
            for start in range(0, len(data), self.batch_size):
                chunk = data[start:start + self.batch_size]
                if np.issubdtype(chunk.dtype, np.integer):
                    yield torch.stack([self._pil_preprocess(pil_from_array(a)) for a in chunk])
                else:
                    yield preprocess_images(chunk, self.preprocess_cfg_)
            return
        batch = []
        for item in data:
            batch.append(self._item_tensor(item))
            if len(batch) == self.batch_size:
                yield torch.stack(batch)
                batch = []
        if batch:
            yield torch.stack(batch)

    def _item_tensor(self, item):
        from PIL import Image

        if isinstance(item, tuple) and item and item[0] == "path":
            with Image.open(item[1]) as image:
                image.load()
                return self._pil_preprocess(image)
        if isinstance(item, Image.Image):
            return self._pil_preprocess(item)
        array = np.asarray(item)
        if np.issubdtype(array.dtype, np.integer):
            return self._pil_preprocess(pil_from_array(array))
        return preprocess_images(array[None], self.preprocess_cfg_)[0]

    def _pil_preprocess(self, image):
        transform = getattr(self, "_pil_transform_cache", None)
        if transform is None:
            import_open_clip()
            from open_clip.transform import PreprocessCfg, image_transform_v2

            cfg = dict(self.preprocess_cfg_)
            fields = PreprocessCfg.__dataclass_fields__
            transform = image_transform_v2(
                PreprocessCfg(**{k: v for k, v in cfg.items() if k in fields}), is_train=False
            )
            self._pil_transform_cache = transform
        return transform(image)

    def _rows_to_images(self, X):
        """Rows of the 2-D path as float images (n, H, W, C) on the [0, 1] scale."""
        return images_from_rows(X, self.preprocess_cfg_["size"], self.image_shape,
                                dtype=np.float64 if self.precision == "fp64" else np.float32)

    # ------------------------------------------------------------------
    # scikit-learn plumbing
    # ------------------------------------------------------------------
    def __getstate__(self):
        state = super().__getstate__()
        for key in ("_tokenizer_cache", "_pil_transform_cache"):
            state.pop(key, None)
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # random_state seeds random weights only; shipped and local weights load the same every time.
        tags.non_deterministic = tags.non_deterministic and (
            self.pretrained == _RANDOM or (self.pretrained is None and self.model_config is not None)
        )
        tags.transformer_tags.preserves_dtype = []
        if self.modality == "text":
            tags.input_tags.two_d_array = False
            tags.input_tags.string = True
        else:
            tags.expected_failed_checks = {**tags.expected_failed_checks, **out_of_range_row_checks()}
        return tags


def _encode_cached(embedder, fingerprint, modality, normalize, precision, preprocess, image_shape, kind, data):
    """What ``transform`` caches: everything but ``embedder`` is the key."""
    del fingerprint, modality, normalize, precision, preprocess, image_shape
    return embedder._encode(kind, data)
