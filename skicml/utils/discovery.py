"""Find skicml's public estimators, tour rows and pretraining recipes by walking the package."""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import pkgutil

from sklearn.base import BaseEstimator

__all__ = ["all_estimators", "all_pretrain_recipes", "all_tour_modules"]

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


def _package_root():
    import skicml

    return pathlib.Path(skicml.__path__[0])


def _modules_named(filename, root=None, prefix="skicml"):
    """Dotted names of the modules called ``filename`` at any depth under ``root``.

    Found on the file tree so that nothing but the matches is ever imported;
    a file in a folder without ``__init__.py`` is not a module and is left out.
    """
    root = _package_root() if root is None else pathlib.Path(root)
    names = []
    for path in sorted(root.rglob(filename)):
        parts = path.relative_to(root).parts
        folders = [root.joinpath(*parts[:i]) for i in range(1, len(parts))]
        if all((folder / "__init__.py").is_file() for folder in folders):
            names.append(".".join((prefix, *parts[:-1], path.stem)))
    return names, root


def all_tour_modules(root=None, prefix="skicml"):
    """List the modules that contribute rows to ``skicml tour``.

    A method family joins the tour by shipping a module named ``_tour.py``
    anywhere under its domain folder, with a function ``tour_entries()``
    that returns a list of :class:`skicml.utils.tour.TourEntry`.

    Parameters
    ----------
    root : path-like or None, default=None
        Folder of the package to search; ``None`` searches skicml itself.
    prefix : str, default="skicml"
        Dotted name of the package at ``root``.

    Returns
    -------
    list of str
        Dotted module names, sorted; none of them is imported.

    Examples
    --------
    >>> from skicml.utils.discovery import all_tour_modules
    >>> "skicml.tabicl._tour" in all_tour_modules()
    True
    """
    return _modules_named("_tour.py", root, prefix)[0]


def _recipe_name(path):
    """The string assigned to ``RECIPE_NAME`` at the top of ``path``, read without importing it."""
    for node in ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == "RECIPE_NAME" for target in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    raise ValueError(
        f"{path} is a pretraining recipe (named {path.name}) but assigns no string to RECIPE_NAME; "
        "add e.g. RECIPE_NAME = \"mymethod\" at module level so that `skicml pretrain mymethod` finds it."
    )


def all_pretrain_recipes(root=None, prefix="skicml"):
    """Map the names of ``skicml pretrain <name>`` to the recipes behind them.

    A method family offers a recipe by shipping a module named
    ``_pretrain.py`` anywhere under its domain folder, with a module-level
    string ``RECIPE_NAME`` and a function ``main(argv)`` that takes the
    remaining command-line arguments; a family with a second recipe ships it
    beside the first as ``_pretrain_<what>.py`` (TabICL's regressor:
    ``_pretrain_regressor.py``). The name is read from the source, so
    listing the recipes imports none of them.

    Parameters
    ----------
    root : path-like or None, default=None
        Folder of the package to search; ``None`` searches skicml itself.
    prefix : str, default="skicml"
        Dotted name of the package at ``root``.

    Returns
    -------
    dict of str to str
        ``recipe name -> "module:main"``, sorted by name.

    Raises
    ------
    ValueError
        If a recipe module has no ``RECIPE_NAME``, or two recipes share a name.

    Examples
    --------
    >>> from skicml.utils.discovery import all_pretrain_recipes
    >>> all_pretrain_recipes()["tabicl"]
    'skicml.tabicl._pretrain:main'
    """
    names, root = _modules_named("_pretrain.py", root, prefix)
    names += _modules_named("_pretrain_*.py", root, prefix)[0]
    recipes = {}
    for module in sorted(names):
        path = root.joinpath(*module.split(".")[1:]).with_suffix(".py")
        recipe = _recipe_name(path)
        if recipe in recipes:
            raise ValueError(
                f"two pretraining recipes are named {recipe!r}: {recipes[recipe].split(':')[0]} and {module}."
            )
        recipes[recipe] = f"{module}:main"
    return dict(sorted(recipes.items()))
