"""How custom ops find their GPU kernels.

A GPU kernel module is imported the first time a CUDA tensor needs it, never
at ``import skicml``: Triton is optional and slow to import. When Triton is
missing, or ``SKICML_DISABLE_CUSTOM_KERNELS=1`` is set (for debugging), the op
falls back to its plain-torch reference.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from functools import lru_cache

__all__ = ["gpu_kernels_enabled", "load_gpu_kernel", "triton_available"]


def triton_available():
    """True when ``import triton`` would succeed."""
    return importlib.util.find_spec("triton") is not None


def gpu_kernels_enabled():
    """False when ``SKICML_DISABLE_CUSTOM_KERNELS`` asks for the references."""
    return os.environ.get("SKICML_DISABLE_CUSTOM_KERNELS", "0") in ("", "0")


@lru_cache(maxsize=None)
def _import_kernel(module, name):
    return getattr(importlib.import_module(module), name)


def load_gpu_kernel(module, name):
    """The GPU launcher ``module.name``, or None when it cannot be used."""
    if not gpu_kernels_enabled() or not triton_available():
        return None
    return _import_kernel(module, name)
