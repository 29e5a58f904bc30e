"""Registry of the model weights shipped inside the skicml wheel, and the one
way to load and save a pretrained module.

Each shipped model is one file under its family's ``_weights/`` folder. The
file is a plain dictionary saved with :func:`torch.save` and loaded with
``weights_only=True`` (no pickled code runs) holding::

    {"state_dict": {...}, "config": {...}, "provenance": {...}}

``provenance`` records how the file was made: the recipe command, the data or
prior settings, steps, seed and the metrics it reached. The registry adds the
file's SHA-256, checked when the file is first read in a process.

Estimators build their network from such a file with :func:`load_module`
(a registered name or a local path, and a function building the network from
the file's ``config``) and write one with :func:`save_module`;
:func:`load_weights` and :func:`save_weights` are the same reader and writer
at the level of the payload dictionary. Pretraining recipes
(``skicml/<family>/_pretrain.py``) are the only code that writes shipped
files. Files are read once per process: a shipped file is cached under its
registered hash, a user's file under its path, size and modification time, so
that a file changed on disk is read again.

Published models (the papers' own checkpoints and the backbones users
already know, :class:`PublishedWeights`) are resolved here and nowhere else:
a published name maps to where its authors publish it (a Hugging Face repo
and file, or a URL), the format its file is in and the estimators that read
it. It is fetched once into the standard cache (``huggingface_hub``'s, which
honours ``HF_HOME``/``HF_HUB_CACHE`` and shows its progress bar, or
torch.hub's for a URL, with the published hash checked), and afterwards
loads as the cached local file. A download happens only for a published name
missing from the cache, and never with ``HF_HUB_OFFLINE=1`` or
``skicml.set_config(allow_download=False)``: then the error names
``skicml download NAME``, which fetches it ahead of time. Anything else that
only a download could resolve (``hf-hub:`` names, URLs, a wrapped library's
download tags) is refused by :func:`check_local` with a message saying what
to pass instead.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import hashlib
import os
import re
import threading
from dataclasses import dataclass
from importlib import resources
from typing import NamedTuple

import torch

__all__ = [
    "LoadedModule", "NotCachedError", "PublishedWeights", "ShippedWeights", "available_weights", "check_local",
    "fetch_published", "load_module", "load_weights", "published_weights", "recipe_command", "register_weights",
    "resolve_published", "save_module", "save_weights",
]


@dataclass(frozen=True)
class ShippedWeights:
    """One model file shipped as package data.

    Attributes
    ----------
    name : str
        Registry name users pass as ``pretrained=`` / ``model_path=``.
    package : str
        Package holding the file, e.g. ``"skicml.tabicl._weights"``.
    filename : str
        File name inside ``package``.
    sha256 : str
        Content hash of the file, checked on load.
    description : str
        What the model is, one line for ``skicml info``.
    benchmark : str
        Its headline score on its benchmark (with the baseline's where there
        is one), for the table of ``skicml info``; the full metrics are in the
        file's provenance.
    """

    name: str
    package: str
    filename: str
    sha256: str
    description: str = ""
    benchmark: str = ""

    def path(self):
        """A traversable pointing at the shipped file."""
        return resources.files(self.package).joinpath(self.filename)

    def is_installed(self):
        return self.path().is_file()


_REGISTRY: dict = {}
_ALL_FAMILIES_IMPORTED = False
# Packages of shared machinery, which register no weights.
_NOT_FAMILIES = {"datasets", "nn", "ops", "utils"}


def _registry(name=None):
    """The registry, complete enough to answer for ``name``.

    Families register their files when imported, and ``import skicml``
    imports none of them; a name not registered yet (or a question about
    all of them) imports every family once, so no lookup depends on what
    the caller happened to import first.
    """
    global _ALL_FAMILIES_IMPORTED
    if (name is None or name not in _REGISTRY) and not _ALL_FAMILIES_IMPORTED:
        import importlib
        import pkgutil

        import skicml

        _ALL_FAMILIES_IMPORTED = True
        for info in pkgutil.iter_modules(skicml.__path__):
            if info.ispkg and not info.name.startswith("_") and info.name not in _NOT_FAMILIES:
                importlib.import_module(f"skicml.{info.name}")
    return _REGISTRY


def register_weights(name, package, filename, sha256, description="", benchmark=""):
    """Declare a shipped model file (called by a family's ``__init__``)."""
    if name in _REGISTRY and _REGISTRY[name].filename != filename:
        raise ValueError(f"Shipped weights {name!r} are already registered.")
    _REGISTRY[name] = ShippedWeights(name, package, filename, sha256, description, benchmark)
    return _REGISTRY[name]


def recipe_command(recipe_name, argv):
    """The ``skicml pretrain`` command line to record in a file's provenance.

    Directories of path arguments are dropped (``--export /home/me/runs/m.pt``
    is recorded as ``--export m.pt``): a shipped file must not carry the
    paths of the machine that trained it, and the command still says what to
    run.

    Parameters
    ----------
    recipe_name : str
        The recipe's ``RECIPE_NAME``.
    argv : list of str
        The recipe's arguments.

    Returns
    -------
    str

    Examples
    --------
    >>> from skicml._weights import recipe_command
    >>> recipe_command("tabicl", ["--steps", "10", "--export", "/tmp/runs/m.pt"])
    'skicml pretrain tabicl --steps 10 --export m.pt'
    """
    parts = []
    for arg in argv:
        option, equals, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        if os.path.isabs(value):
            value = os.path.basename(value.rstrip(os.sep)) or value
        parts.append(f"{option}{equals}{value}")
    return " ".join(["skicml pretrain", recipe_name, *parts])


def available_weights():
    """All registered shipped models, by name."""
    return dict(sorted(_registry().items()))


def shipped_weights(name):
    """The registry entry of a shipped model, or None.

    Unlike ``name in available_weights()``, a name the caller's own family
    registered is found without importing every other family.
    """
    if not isinstance(name, str):
        return None
    if name in _REGISTRY or os.path.exists(name):
        # A path on disk never makes every family import just to be ruled out.
        return _REGISTRY.get(name)
    return _registry(name).get(name)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------
# published models: fetched once into the standard cache
# --------------------------------------------------------------------------
class NotCachedError(FileNotFoundError):
    """A published model that is not in the local cache while downloads are switched off."""


@dataclass(frozen=True)
class PublishedWeights:
    """A model its authors publish, which skicml fetches once into the standard cache.

    Attributes
    ----------
    name : str
        What users pass as ``pretrained=`` (or ``skicml download NAME``).
    family : str
        The skicml family whose estimators read it.
    description : str
        What the model is, one line.
    repo_id, filenames, revision : str, tuple of str, str or None
        Where it lives on the Hugging Face hub: the repository, the file
        (the first of ``filenames`` the repository has; an empty tuple
        fetches the whole repository, as sentence-transformers models are),
        and the revision (a branch, tag or commit; None is ``main``).
    url, sha256 : str
        Where it lives otherwise: the URL its authors publish, fetched with
        torch.hub into the torch cache, and the hash (or hash prefix) they
        publish with it, checked on download; empty when they publish none.
    cache_dir : str
        For a URL, the folder it is cached in (torch.hub's
        ``checkpoints`` folder when empty; open_clip's own for its tags).
    ignore_patterns : tuple of str
        For a whole repository, the files not fetched (other frameworks'
        copies of the weights).
    reader : str
        The official format and what reads it, for the docs and ``skicml info``.
    estimators : str
        The estimators that take the name.
    size, licence, homepage : str
        As the authors state them (``size`` may be computed from the
        architecture; the docs say which).
    """

    name: str
    family: str
    description: str
    repo_id: str = ""
    filenames: tuple = ()
    revision: str | None = None
    url: str = ""
    sha256: str = ""
    cache_dir: str = ""
    ignore_patterns: tuple = ()
    reader: str = ""
    estimators: str = ""
    size: str = ""
    licence: str = ""
    homepage: str = ""

    @property
    def source(self):
        """Where the model lives, one string: ``hf://repo/file@revision`` or the URL."""
        if self.url:
            return self.url
        path = f"{self.repo_id}/{self.filenames[0]}" if self.filenames else self.repo_id
        return f"hf://{path}" + (f"@{self.revision}" if self.revision else "")

    def _url_target(self):
        if self.cache_dir:
            folder = os.path.expanduser(self.cache_dir)
        else:
            folder = os.path.join(torch.hub.get_dir(), "checkpoints")
        return os.path.join(folder, _url_file_name(self))

    def cached_path(self):
        """The file (or, for a whole repository, the folder) in the local cache, or None."""
        if self.url:
            target = self._url_target()
            return target if os.path.isfile(target) else None
        # huggingface_hub's layout, read without it: a cached model loads where the library is absent.
        snapshot = _cached_snapshot(hub_cache_dir(), self.repo_id, self.revision)
        if snapshot is None or not self.filenames:
            return snapshot
        for filename in self.filenames:
            found = os.path.join(snapshot, *filename.split("/"))
            if os.path.isfile(found):
                return found
        return None

    def is_cached(self):
        return self.cached_path() is not None

    def fetch(self, *, download=None):
        """The cached path, downloading the model first when it is missing and downloads are allowed.

        Parameters
        ----------
        download : bool or None, default=None
            None follows ``HF_HUB_OFFLINE`` and ``skicml.get_config()["allow_download"]``;
            False never downloads; True downloads unless ``HF_HUB_OFFLINE`` is set.

        Raises
        ------
        NotCachedError
            When the model is not cached and may not be downloaded; the message
            names ``skicml download``.
        """
        found = self.cached_path()
        if found is not None:
            return found
        reason = _downloads_off_reason(download)
        if reason:
            raise NotCachedError(
                f"{self.name!r} is a published model ({self.description}; {self.source}) that is not in the "
                f"local cache ({self._cache_location()}), and downloads are switched off ({reason}). Fetch it "
                f"once with `skicml download {self.name}` (on a machine with internet, then copy the cache "
                "folder), or allow downloads."
            )
        return self._download()

    def _cache_location(self):
        return os.path.dirname(self._url_target()) if self.url else hub_cache_dir()

    def _download(self):
        if self.url:
            target = self._url_target()
            os.makedirs(os.path.dirname(target), exist_ok=True)
            # torch.hub's downloader: a temporary file renamed into place, the hash prefix checked.
            torch.hub.download_url_to_file(self.url, target, hash_prefix=self.sha256 or None, progress=True)
            return target
        huggingface_hub = _import_hub(self.name)
        cache = hub_cache_dir()
        if not self.filenames:
            return huggingface_hub.snapshot_download(self.repo_id, revision=self.revision, cache_dir=cache,
                                                     ignore_patterns=list(self.ignore_patterns) or None)
        from huggingface_hub.utils import EntryNotFoundError

        for index, filename in enumerate(self.filenames):
            try:
                return huggingface_hub.hf_hub_download(self.repo_id, filename, revision=self.revision,
                                                       cache_dir=cache)
            except EntryNotFoundError:
                if index == len(self.filenames) - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover


def _import_hub(name):
    try:
        import huggingface_hub
    except ImportError:
        raise ImportError(
            f"Downloading the published model {name!r} needs huggingface_hub, which is not installed: "
            "pip install huggingface_hub (or fetch it with `skicml download` where it is)."
        ) from None
    return huggingface_hub


def _url_file_name(entry):
    # A URL's own file name (``pretrain.pth``) can be anyone's: the torch
    # cache keeps it under the published name, open_clip's under its own.
    return os.path.basename(entry.url) if entry.cache_dir else entry.name


def _cached_snapshot(cache, repo_id, revision):
    folder = os.path.join(cache, "models--" + repo_id.replace("/", "--"))
    ref = revision or "main"
    ref_file = os.path.join(folder, "refs", ref)
    commit = ref
    if os.path.isfile(ref_file):
        with open(ref_file, encoding="utf-8") as handle:
            commit = handle.read().strip()
    snapshot = os.path.join(folder, "snapshots", commit)
    return snapshot if os.path.isdir(snapshot) and os.listdir(snapshot) else None


def hub_cache_dir():
    """The Hugging Face hub cache, as huggingface_hub finds it, read at call time.

    ``HF_HUB_CACHE`` (or the older ``HUGGINGFACE_HUB_CACHE``), else
    ``$HF_HOME/hub``, else huggingface_hub's default (``~/.cache/huggingface/hub``).
    """
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return os.path.expanduser(os.environ[variable])
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub")
    try:
        from huggingface_hub import constants
    except ImportError:  # its own default, for reading a cache without the library
        home = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
        return os.path.join(os.path.expanduser(home), "huggingface", "hub")
    return constants.HF_HUB_CACHE


def _hub_offline():
    value = os.environ.get("HF_HUB_OFFLINE")
    if value is not None:
        return value.strip().upper() in {"1", "ON", "YES", "TRUE"}
    try:
        from huggingface_hub import constants
    except ImportError:
        return False
    return bool(constants.HF_HUB_OFFLINE)


def _downloads_off_reason(download=None):
    """Why a missing published model may not be downloaded now, or "" when it may."""
    if _hub_offline():
        return "HF_HUB_OFFLINE=1"
    if download is False:
        return "download=False"
    if download is None:
        from . import get_config

        if not get_config()["allow_download"]:
            return "skicml.set_config(allow_download=False)"
    return ""


_TABICL_REPO = "jingang/TabICL"
_TABICL_READER = ("TabICL checkpoint: torch.save({'config', 'state_dict'}), read with weights_only=True; "
                  "the config says v1 or v2")


def _tabicl_checkpoint(filename, description, estimators, size):
    """One of TabICL's official files: same repository, format, licence and page for all four."""
    return PublishedWeights(filename, "tabicl", description, repo_id=_TABICL_REPO, filenames=(filename,),
                            reader=_TABICL_READER, estimators=estimators, size=size,
                            licence="BSD-3-Clause (the tabicl package)",
                            homepage="https://huggingface.co/jingang/TabICL")


_PUBLISHED = {
    entry.name: entry for entry in (
        _tabicl_checkpoint("tabicl-classifier-v2-20260212.ckpt",
                           "TabICL v2 classifier, the checkpoint of the TabICLv2 paper (tabicl 2.x default)",
                           "TabICLClassifier", "about 110 MB (27.6 M parameters, float32)"),
        _tabicl_checkpoint("tabicl-regressor-v2-20260212.ckpt",
                           "TabICL v2 regressor (999 quantiles), the checkpoint of the TabICLv2 paper",
                           "TabICLRegressor", "about 114 MB (28.6 M parameters, float32)"),
        _tabicl_checkpoint("tabicl-classifier-v1.1-20250506.ckpt",
                           "TabICL v1.1 classifier: v1's network trained on a precursor of the v2 prior",
                           "TabICLClassifier, TabICLEmbedder", "about 108 MB (27.1 M parameters, float32)"),
        _tabicl_checkpoint("tabicl-classifier-v1-20250208.ckpt",
                           "TabICL v1 classifier, the checkpoint of the TabICL paper (ICML 2025)",
                           "TabICLClassifier, TabICLEmbedder", "about 108 MB (27.1 M parameters, float32)"),
        PublishedWeights(
            "point-mae-pretrain", "pointcloud",
            "Point-MAE pretrained on ShapeNet (ECCV 2022), the authors' pretrain.pth",
            url="https://github.com/Pang-Yatian/Point-MAE/releases/download/main/pretrain.pth",
            reader="Point-MAE training checkpoint: {'base_model': state dict with MAE_encoder./module. prefixes, "
                   "'optimizer', 'epoch', ...}; the encoder is read, the decoder left out",
            estimators="GAPromptClassifier, PointMAEPretrainer",
            size="not stated by the authors (the encoder is 22 M parameters)",
            licence="MIT (the Point-MAE repository)", homepage="https://github.com/Pang-Yatian/Point-MAE"),
    )
}
_OPEN_CLIP_SEPARATOR = ":"
_SENTENCE_TRANSFORMERS = "sentence-transformers/"
_SENTENCE_TRANSFORMERS_SIZES = {
    # name: (what it is, size and width as its model card states them)
    "all-MiniLM-L6-v2": ("all-MiniLM-L6-v2 sentence encoder", "about 91 MB (22.7 M parameters), 384-d"),
    "all-mpnet-base-v2": ("all-mpnet-base-v2 sentence encoder", "about 438 MB (109 M parameters), 768-d"),
    "multi-qa-distilbert-cos-v1": (
        "multi-qa-distilbert-cos-v1, the Sentence-BERT model OFA's text-attributed graphs (which GIT's official "
        "code reads) were embedded with", "about 265 MB (66 M parameters), 768-d"),
}


def _sentence_transformers_published(name):
    """The entry of a sentence-transformers model name (``"sentence-transformers/<model>"``), a whole repository."""
    model = name[len(_SENTENCE_TRANSFORMERS):]
    if not name.startswith(_SENTENCE_TRANSFORMERS) or not model or "/" in model:
        return None
    description, size = _SENTENCE_TRANSFORMERS_SIZES.get(model, (f"{model} sentence encoder", "see the model card"))
    return PublishedWeights(
        name, "graph", description, repo_id=name, filenames=(),
        # the repository also holds ONNX, OpenVINO, TensorFlow and Flax copies of the weights
        ignore_patterns=("onnx/*", "openvino/*", "*.h5", "*.msgpack", "*.ot", "*.onnx"),
        reader="a sentence-transformers folder (modules.json, the transformer's config, tokenizer and weights), "
               "read by sentence_transformers.SentenceTransformer",
        estimators="GITEncoder, GITClassifier (text_encoder=)", size=size,
        licence="Apache-2.0 (model card)" if model in _SENTENCE_TRANSFORMERS_SIZES else "as on the model card",
        homepage=f"https://huggingface.co/{name}")


_PUBLISHED.update({f"{_SENTENCE_TRANSFORMERS}{model}": _sentence_transformers_published(_SENTENCE_TRANSFORMERS + model)
                   for model in _SENTENCE_TRANSFORMERS_SIZES})


def _open_clip_published(model_name, tag):
    """The published entry of an open_clip ``(model_name, pretrained tag)`` pair, through open_clip's own table."""
    try:
        import open_clip
    except Exception:  # noqa: BLE001 - absent or broken: then it is no open_clip tag
        return None
    cfg = open_clip.get_pretrained_cfg(model_name, tag) if model_name else {}
    if not cfg:
        return None
    name = f"{model_name}{_OPEN_CLIP_SEPARATOR}{tag}"
    common = dict(reader="open_clip state dict (safetensors or .bin, or OpenAI's TorchScript archive), loaded "
                         "by open_clip with the tag's preprocessing",
                  estimators="CLIPEmbedder (and WhitenedCLIPScorer, CLIPVideoEncoder through it)",
                  size="see the model card", licence="as on the model card",
                  description=f"open_clip {model_name} weights {tag!r}")
    hub = cfg.get("hf_hub", "")
    if hub:
        from open_clip.constants import HF_SAFE_WEIGHTS_NAME, HF_WEIGHTS_NAME

        # "org/repo/file" or "org/repo/" (open_clip's default file name), as open_clip splits it
        repo_id, filename = os.path.split(hub)
        filename = filename or HF_WEIGHTS_NAME
        # open_clip's own order: a safetensors twin of a .bin or .pth first.
        safe = ((HF_SAFE_WEIGHTS_NAME,) if filename == HF_WEIGHTS_NAME
                else (filename[:-4] + ".safetensors",) if filename.endswith((".bin", ".pth")) else ())
        return PublishedWeights(name, "clip", repo_id=repo_id, filenames=(*safe, filename),
                                homepage=f"https://huggingface.co/{repo_id}", **common)
    url = cfg.get("url", "")
    if not url:
        return None
    # open_clip's own hash rules and cache folder for its URLs.
    file_name = os.path.basename(url)
    sha = (url.split("/")[-2] if "openaipublic" in url
           else os.path.splitext(file_name)[0].split("-")[-1] if "mlfoundations" in url else "")
    return PublishedWeights(name, "clip", url=url, sha256=sha, cache_dir=os.path.join("~", ".cache", "clip"),
                            homepage=url, **common)


def published_weights(name=None, *, model_name=None):
    """The published entry of a name, or None; all of skicml's own with no name.

    Parameters
    ----------
    name : str or None
        A published name (``skicml info`` lists them; any
        ``"sentence-transformers/<model>"`` is one too; a hub name may be
        pinned to a revision of its repository, a branch, tag or commit, as
        ``"NAME@REVISION"``), or an open_clip tag:
        with ``model_name`` the tag alone (``"laion2b_s34b_b79k"``), without
        it open_clip's ``"ViT-B-32:laion2b_s34b_b79k"`` form. None returns
        every published name skicml lists (open_clip's tags aside).
    model_name : str or None
        The open_clip architecture ``name`` is a tag of.

    Returns
    -------
    PublishedWeights, dict or None
    """
    if name is None:
        return dict(_PUBLISHED)
    if not isinstance(name, str):
        return None
    if model_name is None and name in _PUBLISHED:
        return _PUBLISHED[name]
    if model_name is None and name.startswith(_SENTENCE_TRANSFORMERS):
        base, at, revision = name.partition("@")
        entry = _sentence_transformers_published(base)
        return dataclasses.replace(entry, name=name, revision=revision) if entry and at and revision else entry
    if model_name is None and "@" in name and not os.path.exists(name):
        # "NAME@REVISION": a hub name pinned to a branch, tag or commit of its repository
        base, _, revision = name.rpartition("@")
        entry = _PUBLISHED.get(base)
        if entry is not None and entry.repo_id and revision:
            return dataclasses.replace(entry, name=name, revision=revision)
        return None
    if model_name is None and _OPEN_CLIP_SEPARATOR in name and not os.path.exists(name):
        model_name, name = name.split(_OPEN_CLIP_SEPARATOR, 1)
    if model_name is None:
        return None
    return _open_clip_published(model_name, name)


def fetch_published(name, *, model_name=None, download=None):
    """The local path of a published model: from the cache, or downloaded once into it.

    Parameters
    ----------
    name : str
        A published name (see :func:`published_weights`).
    model_name : str or None
        The open_clip architecture when ``name`` is one of its tags.
    download : bool or None, default=None
        None downloads a missing model unless ``HF_HUB_OFFLINE`` is set or
        ``skicml.set_config(allow_download=False)``; False never downloads.

    Returns
    -------
    str
        The cached file (a folder for a whole repository).

    Raises
    ------
    KeyError
        If ``name`` is not a published name.
    NotCachedError
        If it is not cached and may not be downloaded; the message names
        ``skicml download``.
    """
    entry = published_weights(name, model_name=model_name)
    if entry is None:
        raise KeyError(f"{name!r} is not a published model; skicml info lists them.")
    return entry.fetch(download=download)


def resolve_published(name, *, model_name=None):
    """``(entry, local path)`` of a published name, or ``(None, None)`` when it is none."""
    entry = published_weights(name, model_name=model_name)
    return (entry, entry.fetch()) if entry is not None else (None, None)


# --------------------------------------------------------------------------
# local only
# --------------------------------------------------------------------------
class _NeverDownloadsError(FileNotFoundError, ValueError):
    """A model named by something only a download could fetch, and no published name.

    Both kinds, so that code catching a missing file and code catching a bad
    argument each see it.
    """


_HUB_PREFIXES = ("hf-hub:", "hf://")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _shipped_names():
    return ", ".join(sorted(_registry())) or "none yet"


def _published_names():
    return ", ".join(sorted(_PUBLISHED))


def check_local(value, param="pretrained", *, download_tag=None, instead=None):
    """Refuse a model reference that only a download could resolve and that is no published name.

    skicml downloads only its published models (:func:`published_weights`),
    by name. A registered or published name or an existing path always
    passes; otherwise a Hugging Face hub name (``"hf-hub:..."``), a URL, or a
    download tag of the library the caller wraps raise, saying what to pass
    instead. Anything else passes: the caller decides whether it is a
    missing file.

    Parameters
    ----------
    value : str, path-like or None
        What the user passed; None and non-strings pass.
    param : str, default="pretrained"
        The argument's name, for the message.
    download_tag : str or None, default=None
        What ``value`` is when the caller knows it to be a download tag, e.g.
        ``"an open_clip download tag"``; None when it is not one.
    instead : str or None, default=None
        What to pass instead, e.g. ``"model_name='local-dir:<folder>'"``;
        None says a local path or one of the shipped models.

    Raises
    ------
    FileNotFoundError
        For all three refusals; the exception is also a :class:`ValueError`.
    """
    if not isinstance(value, (str, os.PathLike)):
        return
    key = os.fspath(value)
    if not isinstance(key, str) or os.path.exists(key) or key in _PUBLISHED or key in _registry(key):
        return
    if instead is None:
        instead = (f"its local path, one of the shipped models ({_shipped_names()}) or a published one "
                   f"({_published_names()})")
    only = "skicml never downloads weights other than its published models, by name (skicml info lists them)"
    if key.startswith(_HUB_PREFIXES):
        raise _NeverDownloadsError(
            f"{param}={key!r} is a Hugging Face hub name; {only}. Download the repository yourself and pass "
            f"{instead}."
        )
    if _URL.match(key):
        raise _NeverDownloadsError(
            f"{param}={key!r} is a URL; {only}. Download the file yourself and pass {instead}."
        )
    if download_tag:
        raise _NeverDownloadsError(f"{param}={key!r} is {download_tag}; pass {instead}.")


# --------------------------------------------------------------------------
# reading, through the one cache
# --------------------------------------------------------------------------
# Read payloads, never modules: every load builds its own module, and
# load_weights hands out copies, so no caller can change what another sees.
_CACHE: collections.OrderedDict = collections.OrderedDict()
_CACHE_SIZE = 8
_CACHE_LOCK = threading.Lock()


def _file_stamp(path):
    stat = os.stat(path)
    return ("file", os.path.abspath(path), stat.st_size, stat.st_mtime_ns)


def _cached(key, read):
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    payload = read()
    with _CACHE_LOCK:
        _CACHE[key] = payload
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return payload


def _forget(path):
    """Drop the cached reads of ``path`` (called after writing it)."""
    path = os.path.abspath(path)
    with _CACHE_LOCK:
        for key in [k for k in _CACHE if k[0] == "file" and k[1] == path]:
            del _CACHE[key]


def _read(path, digest=None):
    try:
        payload, failure = torch.load(path, map_location="cpu", weights_only=True), None
    except Exception as error:  # noqa: BLE001 - any failure to read is the same answer to the user
        payload, failure = None, error
    if failure is not None:
        # torch's message may advise weights_only=False, which would run the
        # file's pickled code: it is never passed on, not even as the context.
        if "Unsupported global" in str(failure):
            reason = ("it holds unsupported objects (pickled classes or functions, not only tensors and plain "
                      "containers), which a safe load refuses to run")
        else:
            reason = "torch cannot read it as a checkpoint; it may be truncated or corrupt, or not a model file"
        raise ValueError(
            f"{os.fspath(path)!r} is not a valid skicml checkpoint: {reason}. Pass a file written by an "
            "estimator's save (or a skicml pretrain recipe), an official checkpoint saved as tensors, or a "
            "shipped model name (skicml info lists them)."
        )
    if not isinstance(payload, dict) or "state_dict" not in payload:
        # A bare state dict, as many official checkpoints are.
        payload = {"state_dict": payload, "config": {}, "provenance": {}}
    payload.setdefault("config", {})
    payload.setdefault("provenance", {})
    payload["provenance"] = dict(payload["provenance"], sha256=digest or _sha256(path))
    return payload


def _read_shipped(entry, path):
    digest = _sha256(path)
    if entry.sha256 and digest != entry.sha256:
        raise ValueError(
            f"Shipped weights {entry.name!r} are corrupted: sha256 {digest} does not "
            f"match the registry ({entry.sha256})."
        )
    return _read(path, digest)


def _payload(name_or_path):
    """The cached payload of a shipped name or a local file; read-only."""
    key = os.fspath(name_or_path)
    # A file on disk never makes every family import just to be ruled out.
    if key in _REGISTRY or (not os.path.isfile(key) and key in _registry(key)):
        entry = _REGISTRY[key]
        with resources.as_file(entry.path()) as path:
            if not path.is_file():
                raise FileNotFoundError(
                    f"Shipped weights {key!r} are registered but {entry.filename} is "
                    f"missing from {entry.package}; reinstall skicml."
                )
            # The registered hash names the content, so a shipped file is hashed once.
            cache_key = ("shipped", entry.sha256) if entry.sha256 else _file_stamp(path)
            return _cached(cache_key, lambda: _read_shipped(entry, path))
    if os.path.isfile(key):
        payload = _cached(_file_stamp(key), lambda: _read(key))
        return dict(payload, provenance=dict(payload["provenance"], path=key))
    entry = published_weights(key)
    if entry is not None and not entry.filenames and not entry.url:
        raise ValueError(f"{key!r} is a published repository ({entry.description}), not a weights file: "
                         f"pass it where {entry.estimators} take it.")
    if entry is not None:
        # Fetched once into the cache (or refused, naming `skicml download`), then a local file.
        path = entry.fetch()
        payload = _cached(_file_stamp(path), lambda: _read(path))
        return dict(payload, provenance=dict(payload["provenance"], published=entry.name, source=entry.source,
                                             path=path))
    check_local(key)
    raise FileNotFoundError(
        f"No shipped or published model named {key!r} and no file at that path, and skicml never downloads "
        f"weights other than its published models: pass the path of a checkpoint on this machine, one of the "
        f"shipped models ({_shipped_names()}) or a published one ({_published_names()}); skicml info lists both."
    )


def load_weights(name_or_path):
    """Load a shipped model by registry name, a model file by local path, or a published model by name.

    Parameters
    ----------
    name_or_path : str or path-like
        A name from :func:`available_weights`, the path of a file written by
        :func:`save_weights` / :func:`torch.save` (a plain state dict, or a
        dict with ``state_dict``, ``config`` and ``provenance``), or a
        published name (:func:`published_weights`: read from the cache, or
        downloaded once into it; its provenance says ``published``,
        ``source`` and ``path``).

    Returns
    -------
    dict
        With keys ``state_dict``, ``config`` and ``provenance``: the caller's
        own copy (the file is read once per process, see the module's notes).

    Raises
    ------
    FileNotFoundError
        If the name is neither registered nor published and no such file
        exists (the message says what can be passed instead), or if a
        published model is not cached and downloads are off
        (:class:`NotCachedError`, naming ``skicml download``).
    ValueError
        If a shipped file's hash does not match the registry.
    """
    return copy.deepcopy(_payload(name_or_path))


class LoadedModule(NamedTuple):
    """What :func:`load_module` returns; unpacks as ``module, config, provenance``."""

    module: torch.nn.Module
    """The network, its weights loaded, in eval mode, on the CPU."""
    config: dict
    """The file's ``config``: the caller's own copy."""
    provenance: dict
    """How the file was made, with its ``sha256`` (and ``path`` for a local file)."""


def load_module(name_or_path, build):
    """Build a network and load a shipped model's or a local file's weights into it.

    Parameters
    ----------
    name_or_path : str or path-like
        A name from :func:`available_weights`, the path of a file on this
        machine or a published name, as for :func:`load_weights`.
    build : callable
        ``build(config) -> torch.nn.Module``: the network the file's
        ``config`` describes (a copy it may change). It may raise when the
        file does not fit what the caller needs.

    Returns
    -------
    LoadedModule
        ``(module, config, provenance)``. Every call builds a new module, so
        two callers never share one; the file itself is read once per process
        while it is unchanged.

    Raises
    ------
    FileNotFoundError
        If the name is neither registered nor published and no such file
        exists, if it is a hub name or a URL (see :func:`check_local`), or if
        a published model is not cached while downloads are off.
    ValueError
        If a shipped file's hash does not match the registry.
    RuntimeError
        If the state dict does not fit the module ``build`` returns.
    """
    payload = _payload(name_or_path)
    module = build(copy.deepcopy(payload["config"]))
    module.load_state_dict(payload["state_dict"])
    return LoadedModule(module.eval(), copy.deepcopy(payload["config"]), copy.deepcopy(payload["provenance"]))


# --------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------
def _check_folder(path, create_folder):
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    if create_folder:
        os.makedirs(folder, exist_ok=True)
    elif not os.path.isdir(folder):
        raise FileNotFoundError(
            f"Cannot save to {os.fspath(path)!r}: its directory {folder!r} does not exist, and saving creates no "
            "directories (a typo in a path would make them anywhere): create the folder first."
        )


def save_weights(path, state_dict, config, provenance, *, create_folder=True):
    """Write a model file in the shipped format and return its SHA-256.

    ``create_folder=False`` (what an estimator's ``save`` passes) refuses a
    path whose folder does not exist instead of creating it.
    """
    _check_folder(path, create_folder)
    # load_weights adds the local path a file was read from; it describes that
    # machine, not the model, so a file written from such a payload drops it.
    provenance = {k: v for k, v in provenance.items() if k != "path"}
    payload = {
        "state_dict": {k: v.detach().cpu().contiguous() for k, v in state_dict.items()},
        "config": dict(config),
        "provenance": provenance,
    }
    torch.save(payload, path)
    # A rewrite within the file system's timestamp resolution keeps its stamp.
    _forget(path)
    return _sha256(path)


def save_module(path, module, config, provenance, *, dtype=None, create_folder=True):
    """Write ``module``'s weights with its ``config`` and ``provenance``; the one writer.

    Parameters
    ----------
    path : str or path-like
    module : torch.nn.Module
    config : dict
        What ``build`` of :func:`load_module` needs to rebuild the network.
    provenance : dict
        How the weights were made (recipe, data, steps, seed, metrics).
    dtype : torch.dtype or None, default=None
        Floating tensors are written in this precision (e.g. ``torch.float32``
        for a file that loads into a network of any precision); None keeps
        the module's.
    create_folder : bool, default=True
        Create the file's folder when it is missing (a recipe's ``--export``);
        ``False`` refuses such a path with an error naming it (an estimator's
        ``save``, where a typo must not make directories anywhere).

    Returns
    -------
    str
        The file's SHA-256.
    """
    state = module.state_dict()
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    return save_weights(path, state, config, provenance, create_folder=create_folder)
