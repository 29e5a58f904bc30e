"""The step loop of the ``skicml pretrain`` recipes (re-exported).

:func:`pretrain` lives in :mod:`skicml.utils.training`, beside the epoch loop
the estimators train with; it stays importable from here, where the recipes
and users found it.
"""

from .training import pretrain

__all__ = ["pretrain"]
