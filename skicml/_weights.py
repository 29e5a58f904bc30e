"""Registry of the model weights shipped inside the skicml wheel.

Each shipped model is one file under its family's ``_weights/`` folder. The
file is a plain dictionary saved with :func:`torch.save` and loaded with
``weights_only=True`` (no pickled code runs) holding::

    {"state_dict": {...}, "config": {...}, "provenance": {...}}

``provenance`` records how the file was made: the recipe command, the data or
prior settings, steps, seed and the metrics it reached. The registry adds the
file's SHA-256, checked on every load.

Pretraining recipes (``skicml/<family>/_pretrain.py``) are the only code that
writes these files, through :func:`save_weights`. Estimators read them through
:func:`load_weights`, which takes either a registered name or a local path:
nothing is ever downloaded.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from importlib import resources

import torch

__all__ = ["ShippedWeights", "available_weights", "load_weights", "register_weights", "save_weights"]


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
        One line for ``skicml info``.
    """

    name: str
    package: str
    filename: str
    sha256: str
    description: str = ""

    def path(self):
        """A traversable pointing at the shipped file."""
        return resources.files(self.package).joinpath(self.filename)

    def is_installed(self):
        return self.path().is_file()


_REGISTRY: dict = {}


def register_weights(name, package, filename, sha256, description=""):
    """Declare a shipped model file (called by a family's ``__init__``)."""
    if name in _REGISTRY and _REGISTRY[name].filename != filename:
        raise ValueError(f"Shipped weights {name!r} are already registered.")
    _REGISTRY[name] = ShippedWeights(name, package, filename, sha256, description)
    return _REGISTRY[name]


def available_weights():
    """All registered shipped models, by name."""
    return dict(sorted(_REGISTRY.items()))


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read(path):
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or "state_dict" not in payload:
        # A bare state dict, as many official checkpoints are.
        payload = {"state_dict": payload, "config": {}, "provenance": {}}
    payload.setdefault("config", {})
    payload.setdefault("provenance", {})
    return payload


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
        With keys ``state_dict``, ``config`` and ``provenance``.

    Raises
    ------
    FileNotFoundError
        If the name is not registered and no such file exists. skicml never
        downloads weights; the message says what can be passed instead.
    ValueError
        If a shipped file's hash does not match the registry.
    """
    key = os.fspath(name_or_path)
    if key in _REGISTRY:
        entry = _REGISTRY[key]
        with resources.as_file(entry.path()) as path:
            if not path.is_file():
                raise FileNotFoundError(
                    f"Shipped weights {key!r} are registered but {entry.filename} is "
                    f"missing from {entry.package}; reinstall skicml."
                )
            digest = _sha256(path)
            if entry.sha256 and digest != entry.sha256:
                raise ValueError(
                    f"Shipped weights {key!r} are corrupted: sha256 {digest} does not "
                    f"match the registry ({entry.sha256})."
                )
            payload = _read(path)
        payload["provenance"] = dict(payload["provenance"], sha256=digest)
        return payload
    if os.path.isfile(key):
        payload = _read(key)
        payload["provenance"] = dict(payload["provenance"], sha256=_sha256(key), path=key)
        return payload
    names = ", ".join(sorted(_REGISTRY)) or "none yet"
    raise FileNotFoundError(
        f"No shipped model named {key!r} and no file at that path. skicml never "
        f"downloads weights: pass the path of a checkpoint on this machine, or "
        f"one of the shipped models ({names})."
    )


def save_weights(path, state_dict, config, provenance):
    """Write a model file in the shipped format and return its SHA-256."""
    payload = {
        "state_dict": {k: v.detach().cpu().contiguous() for k, v in state_dict.items()},
        "config": dict(config),
        "provenance": dict(provenance),
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    torch.save(payload, path)
    return _sha256(path)
