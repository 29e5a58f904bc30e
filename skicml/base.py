"""Shared machinery of every torch-backed skicml estimator.

An estimator mixes :class:`TorchEstimatorMixin` into the usual scikit-learn
bases and calls the helpers below from ``fit``; it never re-implements device
handling, seeding, persistence or the training loop.

- :func:`resolve_device` turns ``device="auto"`` into CUDA when present.
- :func:`seed_from_random_state` and :func:`seeded` make torch reproducible
  from a scikit-learn ``random_state`` without touching the global RNG state
  that the caller sees.
- :func:`to_tensor` / :func:`resolve_dtype` convert validated arrays.
- :class:`TorchEstimatorMixin` pickles fitted modules on the CPU, so an
  estimator fitted on a GPU loads on a machine without one.
- :func:`progress` is the one progress bar (tqdm, silenced by ``verbose=0``).
- :func:`fit_module` is the one supervised / self-supervised training loop
  (it lives in :mod:`skicml.utils.training` and is re-exported here);
  :meth:`TorchEstimatorMixin._fit_module` hands it an estimator's settings.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.utils import Tags, check_random_state

__all__ = [
    "LogitsClassifierMixin",
    "SkicmlTags",
    "TorchEstimatorMixin",
    "TrainingHistory",
    "as_skicml_tags",
    "fit_module",
    "progress",
    "resolve_device",
    "resolve_dtype",
    "seed_from_random_state",
    "seeded",
    "to_device",
    "to_tensor",
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


# --------------------------------------------------------------------------
# tags and the estimator mixin
# --------------------------------------------------------------------------
@dataclass(slots=True)
class SkicmlTags(Tags):
    """scikit-learn's :class:`~sklearn.utils.Tags` plus skicml's own fields.

    Attributes
    ----------
    expected_failed_checks : dict of str to str
        scikit-learn common checks this estimator cannot pass, each mapped to
        the reason. The common test suite marks them as expected failures.
    three_d_input : bool
        The estimator also reads 3-D arrays ``(n_samples, n_steps,
        n_channels)`` (weeks of hourly variables, for one), so skicml's checks
        do not expect such input to be rejected.
    """

    expected_failed_checks: dict = field(default_factory=dict)
    three_d_input: bool = False


def as_skicml_tags(tags):
    """``tags`` as :class:`SkicmlTags` (for estimators without :class:`TorchEstimatorMixin`)."""
    if isinstance(tags, SkicmlTags):
        return tags
    values = {f.name: getattr(tags, f.name) for f in dataclasses.fields(tags)}
    return SkicmlTags(**values)


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


# Estimator parameters that TorchEstimatorMixin._fit_module hands to
# fit_module under the same name.
_TRAINING_SETTINGS = (
    "max_epochs", "batch_size", "lr", "weight_decay", "warmup_fraction", "validation_fraction",
    "n_iter_no_change", "tol", "checkpoint_dir", "verbose",
)


class TorchEstimatorMixin:
    """Device, seeding and persistence for estimators that hold torch state.

    Put it leftmost: ``class MyClassifier(TorchEstimatorMixin, ClassifierMixin,
    BaseEstimator)``. Subclasses are expected to have ``device`` and
    ``random_state`` constructor parameters (and usually ``verbose``).

    Fitted torch modules and tensors stored in attributes are pickled on the
    CPU, so an estimator fitted on a GPU unpickles on a machine without one;
    :meth:`_device` moves them back when predicting.
    """

    def __sklearn_tags__(self):
        tags = as_skicml_tags(super().__sklearn_tags__())
        tags.expected_failed_checks = dict(tags.expected_failed_checks)
        return tags

    def _device(self):
        return resolve_device(getattr(self, "device", "auto"))

    def _seed(self):
        """The torch seed of this fit, drawn once from ``random_state``."""
        return seed_from_random_state(getattr(self, "random_state", None))

    def _fit_module(self, module, X, y=None, **settings):
        """Train ``module`` with :func:`fit_module` under this estimator's settings.

        The estimator's own parameters named like :func:`fit_module`'s
        (``max_epochs``, ``batch_size``, ``lr``, ``weight_decay``,
        ``warmup_fraction``, ``validation_fraction``, ``n_iter_no_change``,
        ``tol``, ``checkpoint_dir``, ``verbose``) are passed when it has
        them; the device is :meth:`_device`, the seed a fresh :meth:`_seed`
        and the progress label the class name.

        Parameters
        ----------
        module : torch.nn.Module
        X, y
            As in :func:`fit_module`.
        **settings
            What the call site decides (``loss``, ``grad_clip``, ``stratify``,
            a ``seed`` it also built the module with...); these win over the
            estimator's parameters.

        Returns
        -------
        module : torch.nn.Module
        history : TrainingHistory
        """
        kwargs = {name: getattr(self, name) for name in _TRAINING_SETTINGS if hasattr(self, name)}
        kwargs["device"] = self._device()
        kwargs["desc"] = type(self).__name__
        if "seed" not in settings:
            # Drawn only when needed: drawing advances a RandomState instance.
            kwargs["seed"] = self._seed()
        kwargs.update(settings)
        return fit_module(module, X, y, **kwargs)

    def __getstate__(self):
        state = super().__getstate__()
        return to_device(state, "cpu")


class LogitsClassifierMixin:
    """``predict_proba`` and ``predict`` of a classifier whose network gives class logits.

    The estimator defines ``_class_logits(X)``, an array of shape
    ``(n_samples, n_classes)`` (checking fittedness first), and ``classes_``.
    """

    def decision_function(self, X):
        """Class logits; for two classes, the second's minus the first's.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        logits = self._class_logits(X)
        return logits[:, 1] - logits[:, 0] if len(self.classes_) == 2 else logits

    def predict_proba(self, X):
        """Class probabilities, the softmax of the logits.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        logits = self._class_logits(X)
        logits = logits - logits.max(axis=1, keepdims=True)
        proba = np.exp(logits)
        return proba / proba.sum(axis=1, keepdims=True)

    def predict(self, X):
        """The most probable class of each sample.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        logits = self._class_logits(X)
        return self.classes_[np.argmax(logits, axis=1)]


# --------------------------------------------------------------------------
# progress
# --------------------------------------------------------------------------
def progress(iterable=None, *, verbose=0, total=None, desc=None, unit="it"):
    """The progress bar of skicml: tqdm, shown only when ``verbose > 0``."""
    from tqdm.auto import tqdm

    return tqdm(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        disable=not verbose,
        leave=verbose > 1,
        dynamic_ncols=True,
    )


# --------------------------------------------------------------------------
# the training loop
# --------------------------------------------------------------------------
# The loop lives in skicml.utils.training, which is built on the helpers
# above; it is imported last so that those helpers already exist when
# training.py imports them back from this partially initialised module.
# The names stay importable from here, where users and examples found them.
from .utils.training import TrainingHistory, fit_module  # noqa: E402
