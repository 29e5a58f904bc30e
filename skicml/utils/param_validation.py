"""Declared parameter rules: the one door to scikit-learn's parameter validation.

An estimator states what each constructor argument may be in a class
attribute, and ``fit`` checks them all before it touches the data::

    from skicml.utils.param_validation import (
        Integral, Interval, StrOptions, fit_context, shared_constraints,
    )

    class MyEncoder(TorchEstimatorMixin, TransformerMixin, BaseEstimator):
        _parameter_constraints = {
            "width": [Interval(Integral, 1, None, closed="left")],
            "pooling": [StrOptions({"mean", "eos"})],
            **shared_constraints("max_epochs", "device", "random_state"),
        }

        @fit_context(prefer_skip_nested_validation=True)
        def fit(self, X, y=None):
            ...

A refused value raises :class:`InvalidParameterError` (a ``ValueError`` and a
``TypeError``) that names the parameter, the allowed values and the value
received. Methods that build a fitted estimator without ``fit`` (such as a
``from_precomputed`` class method) call ``self._validate_params()``. Checks
that relate several parameters, or a parameter and the data, stay
hand-written in ``fit``. Parameters that mean the same wherever they appear
(the training settings, ``pretrained``, ``device``, ``random_state``,
``verbose``) take their rule from :func:`shared_constraints`, so that they
are the same rule everywhere.

skicml code imports these names from here only, never from
``sklearn.utils._param_validation`` or ``sklearn.base`` directly, so a move
inside scikit-learn (whose module is private) is fixed in this one file. The
names used here exist unchanged in scikit-learn 1.6 to 1.9.

Two things differ from scikit-learn:

- :class:`Interval` refuses booleans: ``True`` is an ``int`` to Python but
  never a count, a size or a rate to skicml.
- :data:`DEVICE` is the rule of every ``device`` parameter: a string
  (``"auto"``, ``"cpu"``, ``"cuda:1"``; checked when the device is resolved)
  or a :class:`torch.device`; ``None`` is accepted as ``"auto"`` but not
  advertised.
"""

import os
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import _fit_context
from sklearn.utils._param_validation import (
    HasMethods,
    Hidden,
    InvalidParameterError,
    Options,
    RealNotInt,
    StrOptions,
    validate_params,
)
from sklearn.utils._param_validation import Interval as _SklearnInterval

__all__ = [
    "DEVICE",
    "HasMethods",
    "Hidden",
    "Integral",
    "Interval",
    "InvalidParameterError",
    "Options",
    "Real",
    "RealNotInt",
    "StrOptions",
    "fit_context",
    "shared_constraints",
    "validate_params",
]

#: scikit-learn's ``sklearn.base._fit_context``: decorates ``fit`` (and any
#: other fitting entry, ``partial_fit``, ``fit_predict``...) to validate the
#: declared parameters first; ``prefer_skip_nested_validation=True`` spares
#: the estimators ``fit`` calls internally a second validation.
fit_context = _fit_context


class Interval(_SklearnInterval):
    """scikit-learn's ``Interval``, without booleans.

    Parameters
    ----------
    type : {numbers.Integral, numbers.Real, RealNotInt}
    left, right : float, int or None
        The bounds; ``None`` is unbounded (infinity itself is then outside an
        open end, so ``Interval(Real, 0, None, closed="neither")`` means a
        positive finite number).
    closed : {"left", "right", "both", "neither"}
    """

    def is_satisfied_by(self, val):
        if isinstance(val, (bool, np.bool_)):
            return False
        return super().is_satisfied_by(val)


#: The rule of every ``device`` parameter (see the module docstring).
DEVICE = [str, torch.device, Hidden(None)]

# Parameters that mean the same in every estimator that has them: the
# settings handed to the training loop, the seed, the device, the verbosity
# and the weights to start from.
_SHARED = {
    "max_epochs": [Interval(Integral, 0, None, closed="left")],
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    "lr": [Interval(Real, 0, None, closed="left")],
    "weight_decay": [Interval(Real, 0, None, closed="left")],
    "warmup_fraction": [Interval(Real, 0, 1, closed="both")],
    "validation_fraction": [Interval(Real, 0, 1, closed="left"), None],
    "n_iter_no_change": [Interval(Integral, 1, None, closed="left"), None],
    "checkpoint_dir": [str, os.PathLike, None],
    "pretrained": [str, os.PathLike, None],
    "device": DEVICE,
    "random_state": ["random_state"],
    # "auto": a progress bar appears only when a step runs for more than a few seconds.
    "verbose": ["verbose", StrOptions({"auto"})],
}


def shared_constraints(*names):
    """The rules of parameters that mean the same in every estimator, by name.

    ``max_epochs`` (0 allowed: the untrained control), ``batch_size``,
    ``lr``, ``weight_decay``, ``warmup_fraction``, ``validation_fraction``
    (or None), ``n_iter_no_change`` (or None), ``checkpoint_dir`` (a path or
    None), ``pretrained`` (a shipped name, a path or None), ``device``,
    ``random_state`` and ``verbose``.

    Parameters
    ----------
    *names : str

    Returns
    -------
    dict of str to list
        To unpack into an estimator's ``_parameter_constraints``.

    Examples
    --------
    >>> from skicml.utils.param_validation import shared_constraints
    >>> sorted(shared_constraints("device", "random_state"))
    ['device', 'random_state']
    """
    unknown = sorted(set(names) - set(_SHARED))
    if unknown:
        raise KeyError(f"no shared rule for {unknown}; shared rules exist for {sorted(_SHARED)}.")
    return {name: list(_SHARED[name]) for name in names}
