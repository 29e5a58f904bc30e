"""Shared machinery of every torch-backed skicml estimator.

An estimator mixes :class:`TorchEstimatorMixin` into the usual scikit-learn
bases and calls the helpers below from ``fit``; it never re-implements device
handling, seeding, persistence or the training loop.

The ground-floor helpers live in :mod:`skicml.utils._runtime`, which the
training loop imports too, and are re-exported here under their public names:

- :func:`resolve_device` turns ``device="auto"`` into CUDA when present.
- :func:`seed_from_random_state` and :func:`seeded` make torch reproducible
  from a scikit-learn ``random_state`` without touching the global RNG state
  that the caller sees.
- :func:`to_tensor` / :func:`resolve_dtype` convert validated arrays.
- :func:`progress` is the one progress bar (tqdm, silenced by ``verbose=0``,
  shown after a few seconds with ``verbose="auto"``).
- :func:`torch_threads` applies the thread policy (``skicml.set_config``).
- :func:`warn_user` warns at the user's own line, however deep it was found.

Beside them:

- :class:`TorchEstimatorMixin` pickles fitted modules on the CPU, so an
  estimator fitted on a GPU loads on a machine without one.
- :func:`fit_module` is the one supervised / self-supervised training loop
  (it lives in :mod:`skicml.utils.training` and is re-exported here);
  :meth:`TorchEstimatorMixin._fit_module` hands it an estimator's settings.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass, field

import numpy as np
from sklearn.utils import Tags

from .utils._runtime import (
    progress,
    resolve_device,
    resolve_dtype,
    seed_from_random_state,
    seeded,
    to_device,
    to_tensor,
    torch_threads,
    warn_user,
)
from .utils.training import TrainingHistory, fit_module

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
    "torch_threads",
    "warn_user",
]


# --------------------------------------------------------------------------
# tags and the estimator mixin
# --------------------------------------------------------------------------
def _with_torch_threads(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with torch_threads():
            return method(self, *args, **kwargs)

    wrapper._skicml_threaded = True
    return wrapper


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

    Every public method of a subclass, its own or inherited (``fit``,
    ``predict``, ``transform``, ``sample``, ``word_maps``...), runs under
    :func:`~skicml.utils._runtime.torch_threads`: torch uses the
    ``torch_threads`` setting's intra-op threads (one unless
    :func:`skicml.set_config` says otherwise) and the caller's count comes
    back on return. Only the plumbing that computes nothing is left as it is
    (``get_*``, ``set_*``, ``save*``). The methods are wrapped when the class
    is created, as scikit-learn's ``set_output`` wraps ``transform``.
    """

    _UNTHREADED_PREFIXES = ("get_", "set_", "save")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in dir(cls):
            if name.startswith("_") or name.startswith(cls._UNTHREADED_PREFIXES):
                continue
            # Inherited methods too (a mixin's predict): the class gets its own wrapped copy.
            method = inspect.getattr_static(cls, name, None)
            if inspect.isfunction(method) and not getattr(method, "_skicml_threaded", False):
                setattr(cls, name, _with_torch_threads(method))

    def __sklearn_tags__(self):
        tags = as_skicml_tags(super().__sklearn_tags__())
        tags.expected_failed_checks = dict(tags.expected_failed_checks)
        # Unseeded (random_state=None), a fit draws a fresh torch seed, so
        # initial weights, dropout, shuffles and ensemble permutations differ
        # from run to run; seeded, two fits agree. An estimator whose
        # randomness follows another parameter overrides this in its own tags.
        tags.non_deterministic = tags.non_deterministic or getattr(self, "random_state", False) is None
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
