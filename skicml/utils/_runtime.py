"""The ground floor of skicml: device, seeds, dtypes, tensors, progress.

Everything that computes with torch stands on these helpers: the estimators
through :mod:`skicml.base` (which re-exports them under their public names,
``from skicml.base import seeded``), the training loops of
:mod:`skicml.utils.training` and their callbacks directly. This module
imports torch, numpy and the standard library only, and no other skicml
module, so both of those can import it at their top without an import cycle.

- :func:`resolve_device` turns ``device="auto"`` into CUDA when present.
- :func:`seed_from_random_state` and :func:`seeded` make torch reproducible
  from a scikit-learn ``random_state`` without touching the global RNG state
  that the caller sees.
- :func:`to_tensor` / :func:`resolve_dtype` convert validated arrays, and
  :func:`to_device` moves nested modules and tensors.
- :func:`progress` is the one progress bar (tqdm, silenced by ``verbose=0``,
  shown after a few seconds with ``verbose="auto"``).
- :func:`warn_user` raises a warning at the user's own line, however deep in
  skicml (and scikit-learn's wrappers) it was found.
- :func:`torch_threads` runs a block with the thread count of the
  ``torch_threads`` setting (:mod:`skicml.utils._config`), the one place the
  thread policy is applied.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import sys
import threading
import warnings

import numpy as np
import torch

__all__ = [
    "progress",
    "resolve_device",
    "resolve_dtype",
    "seed_from_random_state",
    "seeded",
    "to_device",
    "to_tensor",
    "torch_threads",
    "warn_user",
]


# --------------------------------------------------------------------------
# device, seeds, dtypes
# --------------------------------------------------------------------------
def resolve_device(device="auto"):
    """Return the :class:`torch.device` an estimator should compute on.

    Parameters
    ----------
    device : {"auto", "cpu", "cuda"}, str or torch.device, default="auto"
        ``"auto"`` picks the first CUDA device when one is available and the
        CPU otherwise. Any string torch understands (``"cuda:1"``) is accepted.

    Returns
    -------
    torch.device

    Raises
    ------
    ValueError
        If the string is not a device, or CUDA is requested on a machine
        without it.
    """
    if device is None or (isinstance(device, str) and device == "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device={device!r} is not a device; expected 'auto', 'cpu', "
            "'cuda', 'cuda:<index>' or a torch.device."
        ) from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} asks for CUDA but torch sees no GPU on this "
            "machine; pass device='cpu' or device='auto'."
        )
    return resolved


def seed_from_random_state(random_state):
    """Draw a torch seed from a scikit-learn ``random_state``.

    ``None`` gives a fresh seed, an int always the same seed, and a
    :class:`numpy.random.RandomState` advances as scikit-learn expects.
    """
    # scikit-learn's own rule for random_state, imported where it is used so
    # that this module stands on torch and numpy alone.
    from sklearn.utils import check_random_state

    return int(check_random_state(random_state).randint(0, 2**31 - 1))


@contextlib.contextmanager
def seeded(seed, device=None):
    """Run a block under a fixed torch seed, restoring the global RNG after.

    Dropout, ``randperm`` and data shuffling inside the block are then
    reproducible, while code outside it sees an untouched random stream.
    """
    device = torch.device(device) if device is not None else torch.device("cpu")
    cuda_devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda_devices, device_type="cuda"):
        torch.manual_seed(seed)
        np_state = np.random.get_state()
        try:
            yield
        finally:
            np.random.set_state(np_state)


_DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}


def resolve_dtype(dtype):
    """Map ``"float32"``, ``np.float64``, ``torch.float32``... to a torch dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    except TypeError:
        name = str(dtype)
    if name not in _DTYPES:
        raise ValueError(
            f"dtype={dtype!r} is not supported; expected one of {sorted(_DTYPES)}."
        )
    return _DTYPES[name]


# --------------------------------------------------------------------------
# tensors
# --------------------------------------------------------------------------
def to_tensor(X, *, dtype=None, device="cpu"):
    """Turn a validated array (or a dict of arrays) into torch tensors.

    Arrays are made contiguous first so read-only or memory-mapped inputs are
    copied rather than shared with torch.
    """
    if isinstance(X, dict):
        return {k: to_tensor(v, dtype=dtype, device=device) for k, v in X.items()}
    if isinstance(X, torch.Tensor):
        tensor = X
    else:
        array = np.asarray(X)
        if not array.flags.writeable or not array.flags.c_contiguous:
            array = np.array(array, order="C", copy=True)
        tensor = torch.from_numpy(array)
    if dtype is not None and tensor.is_floating_point():
        tensor = tensor.to(resolve_dtype(dtype))
    return tensor.to(device)


def to_device(value, device):
    """``value`` with every torch module and tensor nested in it (dicts,
    lists, tuples) on ``device``; nothing is copied that is already there,
    and modules are copied rather than moved, so the caller's stay put."""
    device = torch.device(device)
    if isinstance(value, torch.nn.Module):
        if any(t.device != device for t in value.state_dict().values()):
            return copy.deepcopy(value).to(device)
        return value
    if isinstance(value, torch.Tensor):
        return value.detach().to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


# --------------------------------------------------------------------------
# progress
# --------------------------------------------------------------------------
#: Seconds a ``verbose="auto"`` bar waits before it appears: steps shorter than this stay silent.
AUTO_PROGRESS_DELAY = 5.0


def progress(iterable=None, *, verbose=0, total=None, desc=None, unit="it"):
    """The progress bar of skicml (tqdm).

    Parameters
    ----------
    iterable : iterable or None
    verbose : int, bool or "auto", default=0
        ``0`` is silent; ``"auto"`` (the estimators' default) shows the bar
        only once the step has run for :data:`AUTO_PROGRESS_DELAY` seconds,
        and clears it at the end, as tqdm's ``delay`` does; ``1`` shows it
        at once and clears it; ``2`` and more leave it on screen.
    total : int or None
    desc : str or None
    unit : str, default="it"

    Returns
    -------
    tqdm.tqdm

    Examples
    --------
    >>> from skicml.base import progress
    >>> sum(progress(range(3), verbose="auto"))
    3
    """
    from tqdm.auto import tqdm

    auto = isinstance(verbose, str) and verbose == "auto"
    return tqdm(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        disable=not (auto or verbose),
        leave=not auto and verbose > 1,
        delay=AUTO_PROGRESS_DELAY if auto else 0.0,
        dynamic_ncols=True,
    )


# --------------------------------------------------------------------------
# threads
# --------------------------------------------------------------------------
_threads_state = threading.local()


@contextlib.contextmanager
def torch_threads(n_threads="config"):
    """Run a block with ``n_threads`` torch intra-op threads, then restore the caller's count.

    Parameters
    ----------
    n_threads : int, None or "config", default="config"
        ``"config"`` reads the ``torch_threads`` setting (1 unless
        :func:`skicml.set_config` says otherwise) and applies it only at the
        outermost level, so an estimator that calls another keeps the count
        chosen for it; an int always applies; ``None`` changes nothing.

    Examples
    --------
    >>> import torch
    >>> from skicml.utils._runtime import torch_threads
    >>> before = torch.get_num_threads()
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    from ._config import get_config

    depth = getattr(_threads_state, "depth", 0)
    if n_threads == "config":
        n_threads = get_config()["torch_threads"] if depth == 0 else None
    previous = torch.get_num_threads()
    changed = n_threads is not None and n_threads != previous
    if changed:
        torch.set_num_threads(int(n_threads))
    _threads_state.depth = depth + 1
    try:
        yield
    finally:
        _threads_state.depth = depth
        if changed:
            torch.set_num_threads(previous)


# --------------------------------------------------------------------------
# warnings
# --------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _library_folders():
    import sklearn

    import skicml

    return tuple(os.path.dirname(module.__file__) + os.sep for module in (skicml, sklearn)) + (
        os.path.dirname(contextlib.__file__) + os.sep + "contextlib.py",
        os.path.dirname(contextlib.__file__) + os.sep + "functools.py",
    )


def warn_user(message, category=UserWarning):
    """``warnings.warn`` pointing at the first line outside skicml and scikit-learn: the user's.

    A fixed ``stacklevel`` points at the user only from one depth, while
    skicml's warnings are raised from helpers at several (inside ``fit``,
    inside scikit-learn's ``fit_context`` and the thread-policy wrapper,
    inside a ``Pipeline``). Python 3.12's ``skip_file_prefixes`` does this
    walk; skicml supports 3.11.

    Examples
    --------
    >>> import warnings
    >>> from skicml.base import warn_user
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_user("careful")
    >>> caught[0].filename.startswith("<doctest")
    True
    """
    folders = _library_folders()
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(folders):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1 if frame is not None else 2)
