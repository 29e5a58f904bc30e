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
that a file changed on disk is read again. Nothing is ever downloaded:
:func:`check_local` refuses hub names, URLs and download tags with a message
saying what to pass instead.
"""

from __future__ import annotations

import collections
import copy
import hashlib
import os
import re
import threading
from dataclasses import dataclass
from importlib import resources
from typing import NamedTuple

import torch

__all__ = [
    "LoadedModule", "ShippedWeights", "available_weights", "check_local", "load_module", "load_weights",
    "recipe_command", "register_weights", "save_module", "save_weights",
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
# local only
# --------------------------------------------------------------------------
class _NeverDownloadsError(FileNotFoundError, ValueError):
    """A model named by something only a download could fetch.

    Both kinds, so that code catching a missing file and code catching a bad
    argument each see it.
    """


_HUB_PREFIXES = ("hf-hub:", "hf://")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _shipped_names():
    return ", ".join(sorted(_registry())) or "none yet"


def check_local(value, param="pretrained", *, download_tag=None, instead=None):
    """Refuse a model reference that only a download could resolve.

    skicml never downloads weights. A registered name or an existing path
    always passes; otherwise a Hugging Face hub name (``"hf-hub:..."``), a
    URL, or a download tag of the library the caller wraps raise, saying
    what to pass instead. Anything else passes: the caller decides whether it
    is a missing file.

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
    if not isinstance(key, str) or os.path.exists(key) or key in _registry(key):
        return
    if instead is None:
        instead = f"its local path, or one of the shipped models ({_shipped_names()})"
    if key.startswith(_HUB_PREFIXES):
        raise _NeverDownloadsError(
            f"{param}={key!r} would be downloaded from the Hugging Face hub; skicml never downloads. "
            f"Download the repository yourself and pass {instead}."
        )
    if _URL.match(key):
        raise _NeverDownloadsError(
            f"{param}={key!r} is a URL; skicml never downloads. Download the file yourself and pass {instead}."
        )
    if download_tag:
        raise _NeverDownloadsError(
            f"{param}={key!r} is {download_tag}; skicml never downloads weights. Download the checkpoint "
            f"once yourself and pass {instead}."
        )


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
    check_local(key)
    raise FileNotFoundError(
        f"No shipped model named {key!r} and no file at that path. skicml never "
        f"downloads weights: pass the path of a checkpoint on this machine, or "
        f"one of the shipped models ({_shipped_names()})."
    )


def load_weights(name_or_path):
    """Load a shipped model by registry name, or a model file by local path.

    Parameters
    ----------
    name_or_path : str or path-like
        A name from :func:`available_weights` or the path of a file written by
        :func:`save_weights` / :func:`torch.save` (a plain state dict, or a
        dict with ``state_dict``, ``config`` and ``provenance``).

    Returns
    -------
    dict
        With keys ``state_dict``, ``config`` and ``provenance``: the caller's
        own copy (the file is read once per process, see the module's notes).

    Raises
    ------
    FileNotFoundError
        If the name is not registered and no such file exists. skicml never
        downloads weights; the message says what can be passed instead.
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
        A name from :func:`available_weights` or the path of a file on this
        machine, as for :func:`load_weights`.
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
        If the name is not registered and no such file exists, or if it is a
        hub name or a URL (see :func:`check_local`).
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
