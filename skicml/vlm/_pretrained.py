"""Reading and writing :class:`TinyVLM` files (the shipped one or a local path)."""

from __future__ import annotations

import torch

from .._weights import load_module, save_module
from ._model import TinyVLM

__all__ = ["load_tiny_vlm", "save_tiny_vlm"]


def load_tiny_vlm(name_or_path="tiny-vlm-scenes"):
    """A :class:`TinyVLM` with the weights of a shipped name or a local file, in eval mode.

    Parameters
    ----------
    name_or_path : str or path-like, default="tiny-vlm-scenes"
        A name listed by ``skicml info`` or a file written by :func:`save_tiny_vlm`.

    Returns
    -------
    TinyVLM
    """
    model, _, provenance = load_module(name_or_path, lambda config: TinyVLM(**config))
    model.provenance = provenance
    return model


def save_tiny_vlm(path, model, provenance, dtype=torch.float16):
    """Write ``model`` (weights in ``dtype``, vocabulary and sizes) with its ``provenance``; returns the SHA-256.

    Half precision halves the shipped file; :func:`load_tiny_vlm` reads it
    back into a float32 network, and greedy captions do not change.
    """
    return save_module(path, model, {"vocabulary": list(model.vocabulary), **model.config}, provenance, dtype=dtype)
