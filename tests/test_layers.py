"""The arrows of the map (ARCHITECTURE.md's layer table), checked on the source.

Every module of the package is parsed with :mod:`ast`, nothing is imported,
and each ``import`` / ``from ... import`` that names skicml (relative imports
resolved) must point where the map allows:

- a family (a domain folder: tabicl, clip, graph, wearable and those to come)
  never imports another family;
- ``skicml.ops`` imports only its own modules (and torch, triton);
- ``skicml.nn`` imports only ``nn`` and ``ops``;
- ``skicml.datasets`` imports no family (the models live in the families);
- nothing imports the CLI but the CLI itself (``python -m skicml``);
- a private name, a ``_x`` module or a ``_x`` attribute, is imported only
  from inside the top-level package that holds it (``graph/_graphgpt``
  may import ``graph/_graphs``; ``clip`` may not import ``tabicl._model``).

Imports through ``importlib`` (discovery, the CLI's recipes) are dynamic by
design and not seen here.
"""

import ast
import pathlib
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "skicml"

# Top-level subpackages of skicml that are layers, not method families.
SHARED = {"ops", "nn", "utils", "datasets"}


def _module_name(path, root, prefix):
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([prefix, *parts])


def _modules(root, prefix):
    """``{dotted name: (source, is_package)}`` of every module under ``root``."""
    out = {}
    for path in sorted(pathlib.Path(root).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        out[_module_name(path, root, prefix)] = (path.read_text(encoding="utf-8"), path.name == "__init__.py")
    return out


def _imports(name, source, is_package, known):
    """``(target module, imported private name or None, line)`` for each skicml import of one module."""
    package = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            for alias in node.names:
                child = f"{module}.{alias.name}"
                if child in known:
                    # ``from . import _graphs`` imports the module skicml.graph._graphs.
                    found.append((child, None, node.lineno))
                else:
                    private = alias.name if alias.name.startswith("_") and not alias.name.startswith("__") else None
                    found.append((module, private, node.lineno))
    return found


def _top(module):
    """The top-level package of a skicml module (``graph`` for skicml.graph._graphgpt._model)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


# ``base.py`` and ``utils/`` are one layer, the shared machinery: base.py may
# import the private modules of utils (the ground floor, utils/_runtime.py).
_SAME_OWNER = {"base": "utils"}


def _owner(top):
    return _SAME_OWNER.get(top, top)


def _is_private_part(part):
    return part.startswith("_") and not part.startswith("__")


def _private_problem(importer, target, private, prefix, packages):
    """Why importing the module ``target`` (or its name ``private``) from ``importer`` crosses packages."""
    parts = target.split(".")
    for i, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not part.startswith("__"):
            # A private module at the package root (skicml._weights, the one
            # registry) is the whole package's; deeper ones belong to their
            # top-level package, whose subpackages may share them.
            if i >= 2 and _owner(_top(importer)) != parts[1]:
                return f"a private name imported from outside {prefix}.{parts[1]}"
            break
    if private is not None:
        if len(parts) > 1 and f"{prefix}.{parts[1]}" in packages:
            if _owner(_top(importer)) != parts[1]:
                return f"a private name imported from outside {prefix}.{parts[1]}"
        elif importer != target:
            return f"a private name of {target} imported from another module"
    return None


def check_layers(root=ROOT, prefix="skicml"):
    """Every import of the package at ``root`` that the map forbids, as readable lines."""
    modules = _modules(root, prefix)
    known = set(modules)
    tops = {_top(m) for m in known if _top(m)}
    packages = {m for m, (_, is_package) in modules.items() if is_package}
    families = {t for t in tops if f"{prefix}.{t}" in packages} - SHARED
    cli = {f"{prefix}.cli", f"{prefix}.__main__"}
    problems = []
    for name, (source, is_package) in modules.items():
        here = _top(name)
        for target, private, line in _imports(name, source, is_package, known):
            if target != prefix and not target.startswith(prefix + "."):
                continue
            there = _top(target)
            where = f"{name}:{line} imports {target}" + (f".{private}" if private else "")
            if any(target == c or target.startswith(c + ".") for c in cli) and name not in cli:
                problems.append(f"{where}: nothing imports the CLI")
            if here in families and there in families and here != there:
                problems.append(f"{where}: a family imports another family")
            if here == "ops" and there != "ops":
                problems.append(f"{where}: ops imports only ops")
            if here == "nn" and there not in {"nn", "ops"}:
                problems.append(f"{where}: nn imports only nn and ops")
            if here == "datasets" and there in families:
                problems.append(f"{where}: datasets import no model or family")
            private_problem = _private_problem(name, target, private, prefix, packages)
            if private_problem:
                problems.append(f"{where}: {private_problem}")
    return sorted(problems)


def test_the_package_follows_the_map():
    assert check_layers() == []


def _tree(tmp_path, files):
    root = tmp_path / "pkg"
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    for folder in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
        (folder / "__init__.py").touch()
    return root


BASE_TREE = {
    "__init__.py": "from .fam import Estimator\n",
    "__main__.py": "from .cli import main\n",
    "cli.py": "from . import _weights\nfrom .utils import discovery\n",
    "base.py": "def _check(x):\n    return x\n",
    "_weights.py": "def register_weights():\n    pass\n",
    "ops/__init__.py": "from ._kernel import op\n",
    "ops/_kernel.py": "import torch\nfrom . import _dispatch\n",
    "ops/_dispatch.py": "",
    "nn/__init__.py": "from ..ops import op\nfrom .block import Block\n",
    "nn/block.py": "from ..ops import op\n",
    "utils/__init__.py": "from .discovery import all_estimators\n",
    "utils/discovery.py": "import importlib\n",
    "datasets/__init__.py": "from ._shapes import make\nfrom ..utils import discovery\n",
    "datasets/_shapes.py": "import numpy\n",
    "fam/__init__.py": "from .._weights import register_weights\nfrom ._est import Estimator\n",
    "fam/_est.py": "from ..nn import Block\nfrom ..datasets import make\nfrom ._model import Net\n",
    "fam/_model.py": "from ..nn.block import Block\nfrom .. import ops\nNet = Block\n",
    "fam/_tour.py": "def tour_entries():\n    return []\n",
    "dom/__init__.py": "from ._meth import Method\n",
    "dom/_shared.py": "def _helper():\n    pass\n",
    "dom/_meth/__init__.py": "from ._method import Method\n",
    "dom/_meth/_method.py": "from .._shared import _helper\nfrom ... import base\nclass Method:\n    pass\n",
}


def test_checker_passes_a_tree_that_follows_the_map(tmp_path):
    assert check_layers(_tree(tmp_path, BASE_TREE), "pkg") == []


@pytest.mark.parametrize("relative, source, expected", [
    ("fam/_est.py", "from ..dom import Method\n", "a family imports another family"),
    ("dom/_meth/_method.py", "from ...fam import Estimator\n", "a family imports another family"),
    ("ops/_kernel.py", "from ..nn import Block\n", "ops imports only ops"),
    ("ops/_kernel.py", "import pkg.utils.discovery\n", "ops imports only ops"),
    ("nn/block.py", "from .. import base\n", "nn imports only nn and ops"),
    ("nn/block.py", "from ..fam import Estimator\n", "nn imports only nn and ops"),
    ("datasets/_shapes.py", "def f():\n    from pkg.fam import Estimator\n", "datasets import no model or family"),
    ("fam/_est.py", "from .. import cli\n", "nothing imports the CLI"),
    ("utils/discovery.py", "from pkg.cli import main\n", "nothing imports the CLI"),
    ("utils/discovery.py", "from ..fam import _tour\n", "a private name imported from outside pkg.fam"),
    ("utils/discovery.py", "from ..datasets._shapes import make\n", "private name imported from outside pkg.datasets"),
    ("fam/_est.py", "from ..utils.discovery import _walk\n", "a private name imported from outside pkg.utils"),
    ("fam/_est.py", "from ..base import _check\n", "a private name of pkg.base imported from another module"),
])
def test_checker_catches_each_forbidden_arrow(tmp_path, relative, source, expected):
    files = dict(BASE_TREE)
    files[relative] = files.get(relative, "") + source
    problems = check_layers(_tree(tmp_path, files), "pkg")
    assert problems and all(expected in p for p in problems), problems
    module = "pkg." + relative[:-3].replace("/", ".")
    assert all(p.startswith(module + ":") for p in problems)
