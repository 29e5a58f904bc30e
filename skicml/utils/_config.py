"""skicml-wide settings: :func:`get_config`, :func:`set_config`, :func:`config_context`.

Modelled on scikit-learn's ``sklearn.set_config``: a setting holds for the
whole process (or, inside :func:`config_context`, for a block of code in the
calling thread). This module imports only the standard library, so the
ground floor (:mod:`skicml.utils._runtime`) can read it.

``torch_threads``
    torch's intra-op threads while a skicml estimator fits, predicts,
    transforms or samples (``1`` by default, or the environment variable
    ``SKICML_TORCH_THREADS``); ``None`` leaves torch's own setting alone.
    One thread is the default because most skicml networks are made of
    small operations, where a second OpenMP thread spins against any other
    busy process: on a shared 2-core machine two threads made Race-DiT and
    GAPrompt 8-9x slower than one (``doc/performance.rst``, "Threads").
    Raise it for large networks on a machine of your own, or use more
    processes (``n_jobs`` of ``GridSearchCV``, each with its one thread). An
    estimator's own ``n_jobs`` (TabICL's) wins over this setting.

``allow_download``
    Whether a published model (``skicml info`` lists them: TabICL's official
    checkpoints, open_clip's pretrained tags, Point-MAE...) missing from the
    local cache may be downloaded when an estimator is given its name
    (``True`` by default, or the environment variable
    ``SKICML_ALLOW_DOWNLOAD=0``). With ``False``, as with Hugging Face's own
    ``HF_HUB_OFFLINE=1``, such a name loads only from the cache and a missing
    file raises an error naming ``skicml download``, the command that fetches
    it ahead of time. Shipped models and local files never need the network.
"""

from __future__ import annotations

import contextlib
import os
import threading

__all__ = ["config_context", "get_config", "set_config"]


def _threads_from_environment():
    value = os.environ.get("SKICML_TORCH_THREADS", "").strip()
    if not value:
        return 1
    if value.lower() == "none":
        return None
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"SKICML_TORCH_THREADS={value!r}; expected a whole number >= 1 or 'none'.")
    return threads


def _downloads_from_environment():
    value = os.environ.get("SKICML_ALLOW_DOWNLOAD", "").strip().lower()
    if not value:
        return True
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"SKICML_ALLOW_DOWNLOAD={value!r}; expected 1 or 0 (true/false, yes/no, on/off).")


_global_config = {"torch_threads": _threads_from_environment(), "allow_download": _downloads_from_environment()}
_local = threading.local()


def _thread_config():
    # Each thread starts from the process-wide settings, as scikit-learn's do.
    if not hasattr(_local, "config"):
        _local.config = dict(_global_config)
    return _local.config


def get_config():
    """The current values of skicml's settings.

    Returns
    -------
    dict
        ``{"torch_threads": int or None, "allow_download": bool}``; see
        :func:`set_config`.

    Examples
    --------
    >>> import skicml
    >>> skicml.get_config()["torch_threads"]
    1
    """
    return dict(_thread_config())


def _check_threads(torch_threads):
    if torch_threads is not None and (isinstance(torch_threads, bool) or not isinstance(torch_threads, int)
                                      or torch_threads < 1):
        raise ValueError(f"torch_threads={torch_threads!r}; expected a whole number >= 1, or None to leave "
                         "torch's own thread count alone.")


def _check_download(allow_download):
    if not isinstance(allow_download, bool):
        raise ValueError(f"allow_download={allow_download!r}; expected True or False.")


_UNSET = object()


def set_config(torch_threads=_UNSET, allow_download=_UNSET):
    """Change skicml's settings for the rest of the process.

    Parameters
    ----------
    torch_threads : int or None
        torch's intra-op threads while a skicml estimator works (1 by
        default; ``None`` leaves torch's setting as it is). The caller's own
        thread count is restored when each call returns.

    Examples
    --------
    >>> import skicml
    >>> skicml.set_config(torch_threads=2)
    >>> skicml.get_config()["torch_threads"]
    2
    >>> skicml.set_config(torch_threads=1)
    """
    if torch_threads is not _UNSET:
        _check_threads(torch_threads)
    if allow_download is not _UNSET:
        _check_download(allow_download)
    for key, value in (("torch_threads", torch_threads), ("allow_download", allow_download)):
        if value is not _UNSET:
            _global_config[key] = value
            _thread_config()[key] = value


@contextlib.contextmanager
def config_context(*, torch_threads=_UNSET, allow_download=_UNSET):
    """Change skicml's settings inside a ``with`` block of the calling thread.

    Parameters
    ----------
    torch_threads : int or None
        As in :func:`set_config`.
    allow_download : bool
        As in :func:`set_config`.

    Examples
    --------
    >>> import skicml
    >>> with skicml.config_context(torch_threads=None):
    ...     print(skicml.get_config()["torch_threads"])
    None
    >>> with skicml.config_context(allow_download=False):
    ...     print(skicml.get_config()["allow_download"])
    False
    """
    if torch_threads is not _UNSET:
        _check_threads(torch_threads)
    if allow_download is not _UNSET:
        _check_download(allow_download)
    config = _thread_config()
    previous = dict(config)
    if torch_threads is not _UNSET:
        config["torch_threads"] = torch_threads
    if allow_download is not _UNSET:
        config["allow_download"] = allow_download
    try:
        yield
    finally:
        config.clear()
        config.update(previous)
