"""Find skicml's public estimators by walking the package."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from sklearn.base import BaseEstimator

__all__ = ["all_estimators"]

# Subpackages that hold no estimators and only add import time to the walk.
_SKIP = {"skicml.ops", "skicml.nn", "skicml.utils", "skicml.datasets", "skicml.cli", "skicml.__main__"}


def _public_modules():
    import skicml

    yield skicml
    for info in pkgutil.walk_packages(skicml.__path__, prefix="skicml."):
        name = info.name
        if any(name == skip or name.startswith(skip + ".") for skip in _SKIP):
            continue
        if any(part.startswith("_") for part in name.split(".")[1:]):
            # Private modules are reached through their package's re-exports.
            continue
        yield importlib.import_module(name)


def all_estimators(type_filter=None):
    """List every public estimator of skicml.

    Parameters
    ----------
    type_filter : {"classifier", "regressor", "transformer", "outlier_detector"}, \
            list of them, or None
        Keep only estimators of these kinds; ``None`` keeps all.

    Returns
    -------
    list of (str, type)
        ``(class name, class)`` pairs sorted by name.

    Examples
    --------
    >>> from skicml.utils import all_estimators
    >>> names = [name for name, _ in all_estimators()]
    """
    found = {}
    for module in _public_modules():
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name, None)
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseEstimator)
                and obj.__module__.startswith("skicml.")
                and not inspect.isabstract(obj)
                and not name.startswith("_")
            ):
                found[name] = obj
    estimators = sorted(found.items())
    if type_filter is None:
        return estimators
    wanted = {type_filter} if isinstance(type_filter, str) else set(type_filter)
    allowed = {"classifier", "regressor", "transformer", "outlier_detector"}
    if not wanted <= allowed:
        raise ValueError(f"type_filter={type_filter!r}; expected values among {sorted(allowed)}.")

    def kinds(cls):
        from sklearn.base import TransformerMixin
        from sklearn.utils import get_tags

        out = set()
        try:
            estimator_type = get_tags(cls()).estimator_type
        except TypeError:
            estimator_type = None
        if estimator_type:
            out.add(estimator_type)
        if issubclass(cls, TransformerMixin):
            out.add("transformer")
        return out

    return [(name, cls) for name, cls in estimators if kinds(cls) & wanted]
