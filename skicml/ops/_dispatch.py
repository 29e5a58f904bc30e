"""How custom ops find their GPU kernels.

A GPU kernel module is imported the first time a CUDA tensor needs it, never
at ``import skicml``: Triton is optional and slow to import. When Triton is
missing, or ``SKICML_DISABLE_CUSTOM_KERNELS=1`` is set (for debugging), the op
falls back to its plain-torch reference.

A CPU kernel written in C is compiled the first time it is needed, with the
system C compiler, into a cache directory (``$SKICML_CACHE_DIR``, default
``~/.cache/skicml/ops``) under a name keyed by the hash of its source, flags
and machine, and loaded with :mod:`ctypes`: :func:`load_c_kernel`. Without a
working compiler the op warns once and runs its reference.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import importlib.util
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import warnings
from functools import lru_cache
from pathlib import Path

__all__ = [
    "C_FLAGS",
    "compile_c_library",
    "find_c_compiler",
    "gpu_kernels_enabled",
    "load_c_kernel",
    "load_gpu_kernel",
    "reset_c_kernel",
    "triton_available",
]

C_FLAGS = ("-O2", "-shared", "-fPIC", "-std=c99")


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


# --------------------------------------------------------------------------
# C kernels compiled at first use


def c_cache_dir():
    """Where compiled kernels are kept: ``$SKICML_CACHE_DIR`` or ``~/.cache/skicml/ops``."""
    return Path(os.environ.get("SKICML_CACHE_DIR") or Path.home() / ".cache" / "skicml" / "ops")


def find_c_compiler():
    """Path of the C compiler to use (``$CC``, ``cc`` or ``gcc``), or None."""
    for candidate in (os.environ.get("CC"), "cc", "gcc"):
        if candidate:
            found = shutil.which(candidate)
            if found:
                return found
    return None


def c_library_path(name, source, flags=C_FLAGS):
    """The cached library of ``source`` (bytes) built with ``flags``."""
    # The hash covers the source, the flags and the machine, so an edited
    # kernel (or a home directory shared across architectures) never loads a
    # stale library.
    key = hashlib.sha256(source + repr(tuple(flags)).encode() + platform.machine().encode())
    return c_cache_dir() / f"{name}-{key.hexdigest()[:16]}.so"


def compile_c_library(source_path, target, flags=C_FLAGS):
    """Compile into a temporary file beside ``target``, then rename it into place.

    The rename is atomic, so a process racing us either sees no library or a
    complete one. Raises RuntimeError with the reason on failure.
    """
    compiler = find_c_compiler()
    if compiler is None:
        raise RuntimeError("no C compiler was found (looked for $CC, cc and gcc on PATH)")
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.stem + "-", suffix=".so.tmp", dir=target.parent)
    os.close(fd)
    try:
        result = subprocess.run(
            [compiler, *flags, str(source_path), "-o", tmp], capture_output=True, text=True,
            timeout=120, check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{compiler} failed on {source_path} (exit {result.returncode}): "
                f"{result.stderr.strip()[-1500:]}"
            )
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


_c_lock = threading.Lock()
_c_kernels = {}


def load_c_kernel(name, source_path, bind, *, op, fallback="its plain-torch reference",
                  flags=C_FLAGS):
    """The kernel of the C file ``source_path``, compiled and loaded on first use; or None.

    Parameters
    ----------
    name : str
        The library's name in the cache (``<name>-<hash>.so``) and the key of
        the loaded kernel in this process.
    source_path : path-like
        The C source.
    bind : callable
        Called once with the loaded :class:`ctypes.CDLL`; returns what this
        function returns from then on (the ctypes functions with their
        argument types set).
    op : str
        The op's name, for the warning.
    fallback : str
        What runs instead, for the warning.
    flags : sequence of str
        Compiler flags (part of the cache key).

    Returns
    -------
    object or None
        ``bind(library)``, or None, with one RuntimeWarning per process, when
        the kernel cannot be built or loaded (the decision is remembered until
        :func:`reset_c_kernel`).
    """
    with _c_lock:
        if name in _c_kernels:
            return _c_kernels[name]
        kernel = None
        try:
            source_path = Path(source_path)
            path = c_library_path(name, source_path.read_bytes(), flags)
            if not path.exists():
                compile_c_library(source_path, path, flags)
            kernel = bind(ctypes.CDLL(str(path)))
        except (OSError, RuntimeError, AttributeError, subprocess.SubprocessError) as exc:
            warnings.warn(
                f"{op} runs {fallback} because its C kernel could not be built: {exc}. Install a "
                f"C compiler (e.g. `apt install gcc`) or point $CC at one, and make "
                f"{c_cache_dir()} writable (or set $SKICML_CACHE_DIR).",
                RuntimeWarning, stacklevel=4,
            )
        _c_kernels[name] = kernel
        return kernel


def reset_c_kernel(name):
    """Forget the loaded kernel ``name`` (and a fallback decision); for tests."""
    with _c_lock:
        _c_kernels.pop(name, None)
