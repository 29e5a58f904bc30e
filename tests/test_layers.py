"""The arrows of the map (ARCHITECTURE.md's layer table), checked on the source.

Every module of the package is parsed with :mod:`ast`, nothing is imported,
and each ``import`` / ``from ... import`` that names skicml (relative imports
resolved, function-level imports included) must point where the map allows:

- a family (a domain folder: tabicl, clip, graph, video and those to come)
  never imports another family's private module, and imports another
  family's public package only along an edge declared in
  :data:`FAMILY_EDGES` (``video -> clip``: ViLAMP's frame encoder is
  :class:`~skicml.clip.CLIPEmbedder`); a piece two families need otherwise
  moves down into ``nn``, ``ops`` or ``utils``;
- a family imports no skicml module through ``importlib``
  (``import_module("skicml.clip")``, ``import_module(f"skicml.{name}")``,
  a relative or a computed name): such an import would hide an edge from
  this test, so a declared edge is imported normally (inside the function
  that needs it when its import cost matters);
- ``skicml.ops`` imports only its own modules (and torch, triton);
- ``skicml.nn`` imports only ``nn`` and ``ops``;
- ``skicml.datasets`` imports no family (the models live in the families);
- nothing imports the CLI but the CLI itself (``python -m skicml``);
- a private name, a ``_x`` module or a ``_x`` attribute, is imported only
  from inside the top-level package that holds it (``graph/_graphgpt``
  may import ``graph/_graphs``; ``clip`` may not import ``tabicl._model``);
  ``base.py`` and ``utils/`` are one layer, the shared machinery, so
  ``base.py`` imports the ground floor ``utils/_runtime.py``.

The package has no import cycle: :func:`import_cycles` builds the graph of
module-level imports (statements that run when a module is imported, class
bodies and ``if`` / ``try`` blocks included; imports inside functions, which
run only when called, and ``if TYPE_CHECKING:`` blocks are left out) and
finds its strongly connected components.

The shared layers' own ``importlib`` calls (estimator discovery, the tour,
the CLI's recipes, the weights registry, ``ops/_dispatch.py``'s kernels) are
dynamic by design and not checked here.
"""

import ast
import pathlib
import re
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "skicml"

# Top-level subpackages of skicml that are layers, not method families.
SHARED = {"ops", "nn", "utils", "datasets"}

# The public cross-family edges: (importing family, imported family) -> why.
# Keep it short: a piece two families need moves down instead.
FAMILY_EDGES = {
    ("video", "clip"): "ViLAMP's CLIPVideoEncoder encodes frames with clip.CLIPEmbedder",
}


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


def _is_type_checking(test):
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_nodes(tree):
    """The nodes of ``tree`` that run when the module is imported (not function bodies)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _imports(name, source, is_package, known, module_level=False):
    """``(target module, imported private name or None, line)`` for each import of one module.

    With ``module_level``, only the imports that run when the module itself
    is imported.
    """
    package = name if is_package else name.rpartition(".")[0]
    found = []
    tree = ast.parse(source)
    for node in _module_level_nodes(tree) if module_level else ast.walk(tree):
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


_IMPORT_FUNCTIONS = {"import_module", "__import__"}


def _dynamic_imports(source, prefix):
    """``(what, line)`` for each ``importlib`` import that names ``prefix`` or hides its name.

    A literal naming the package (``"skicml.clip"``, an f-string starting
    ``"skicml."``) or a relative one (``".clip"``) is reported as written; a
    name computed at run time is reported as ``"a computed name"``, since it
    could be any module. Literal third-party names (``"open_clip"``) pass.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        function = node.func
        called = function.id if isinstance(function, ast.Name) else getattr(function, "attr", None)
        if called not in _IMPORT_FUNCTIONS:
            continue
        argument = node.args[0]
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            text = argument.value
        elif isinstance(argument, ast.JoinedStr):
            head = argument.values[0] if argument.values else None
            text = head.value + "{...}" if isinstance(head, ast.Constant) else ""
        else:
            text = ""
        if not text or text.startswith("{"):
            found.append(("a computed name", node.lineno))
        elif text == prefix or text.startswith((prefix + ".", ".")):
            found.append((repr(text), node.lineno))
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


def check_layers(root=ROOT, prefix="skicml", edges=FAMILY_EDGES):
    """Every import of the package at ``root`` that the map forbids, as readable lines.

    ``edges`` holds the declared ``(family, family)`` public edges.
    """
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
            if here in families and there in families and here != there and (here, there) not in edges:
                problems.append(f"{where}: a family imports another family along no declared edge")
            if here == "ops" and there != "ops":
                problems.append(f"{where}: ops imports only ops")
            if here == "nn" and there not in {"nn", "ops"}:
                problems.append(f"{where}: nn imports only nn and ops")
            if here == "datasets" and there in families:
                problems.append(f"{where}: datasets import no model or family")
            private_problem = _private_problem(name, target, private, prefix, packages)
            if private_problem:
                problems.append(f"{where}: {private_problem}")
        if here in families:
            for what, line in _dynamic_imports(source, prefix):
                problems.append(
                    f"{name}:{line} imports {what} through importlib: a family imports "
                    "skicml modules normally, along a declared edge"
                )
    return sorted(problems)


def family_edges(root=ROOT, prefix="skicml"):
    """The ``(family, family)`` edges the package at ``root`` uses, static imports only."""
    modules = _modules(root, prefix)
    known = set(modules)
    packages = {m for m, (_, is_package) in modules.items() if is_package}
    families = {_top(m) for m in packages if _top(m)} - SHARED
    used = set()
    for name, (source, is_package) in modules.items():
        for target, _, _ in _imports(name, source, is_package, known):
            here, there = _top(name), _top(target)
            if target.startswith(prefix + ".") and here in families and there in families and here != there:
                used.add((here, there))
    return used


def import_cycles(root=ROOT, prefix="skicml"):
    """The import cycles of the package at ``root``, each as ``a -> b -> ... -> a``.

    The graph has an edge from a module to each package module it imports at
    module level (``from .x import name`` imports ``x``; ``from . import x``,
    with ``x`` a module, imports ``x``; ``from . import name`` imports the
    package itself). Each strongly connected component of more than one
    module is reported by one of its shortest cycles.
    """
    modules = _modules(root, prefix)
    known = set(modules)
    graph = {name: set() for name in modules}
    for name, (source, is_package) in modules.items():
        for target, _, _ in _imports(name, source, is_package, known, module_level=True):
            if target in known and target != name:
                graph[name].add(target)

    # Tarjan's strongly connected components, iteratively.
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)

    cycles = []
    for component in components:
        first = min(component)
        # The shortest way back to ``first`` inside the component.
        paths, seen, cycle = [[first]], {first}, None
        while paths and cycle is None:
            next_paths = []
            for path in paths:
                for child in sorted(graph[path[-1]] & component):
                    if child == first:
                        cycle = path + [first]
                        break
                    if child not in seen:
                        seen.add(child)
                        next_paths.append(path + [child])
                if cycle:
                    break
            paths = next_paths
        cycles.append(" -> ".join(cycle))
    return sorted(cycles)


def test_the_package_follows_the_map():
    assert check_layers() == []


def test_every_declared_edge_is_used():
    # The list says what the source does, not what it once did.
    assert set(FAMILY_EDGES) <= family_edges()


def test_the_package_has_no_import_cycle():
    assert import_cycles() == []


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
    ("fam/_est.py", "from ..dom import Method\n", "a family imports another family along no declared edge"),
    ("dom/_meth/_method.py", "from ...fam import Estimator\n", "a family imports another family"),
    ("dom/_meth/_method.py", "def f():\n    from pkg.fam import Estimator\n", "a family imports another family"),
    # The sideways import of issue 56: a family loaded another through importlib.
    ("dom/_meth/_method.py", "import importlib\ndef f():\n    return importlib.import_module('pkg.fam').Estimator\n",
     "imports 'pkg.fam' through importlib"),
    ("dom/_meth/_method.py", "import importlib\ndef f(n):\n    return importlib.import_module(f'pkg.{n}')\n",
     "imports 'pkg.{...}' through importlib"),
    ("fam/_est.py", "from importlib import import_module\nNet = import_module('.._model', __name__)\n",
     "imports '.._model' through importlib"),
    ("fam/_est.py", "import importlib\ndef f(name):\n    return importlib.import_module(name)\n",
     "imports a computed name through importlib"),
    ("fam/_est.py", "X = __import__('pkg.dom')\n", "through importlib"),
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


def test_a_declared_edge_allows_the_public_package_only(tmp_path):
    edges = {("dom", "fam"): "the fixture's declared edge"}
    files = dict(BASE_TREE)
    files["dom/_meth/_method.py"] += "def f():\n    from ...fam import Estimator\n"
    root = _tree(tmp_path, files)
    assert check_layers(root, "pkg", edges=edges) == []
    assert family_edges(root, "pkg") == {("dom", "fam")}
    # Declared or not, a family's private module stays its own ...
    files["dom/_meth/_method.py"] += "from ...fam._est import Estimator\n"
    problems = check_layers(_tree(tmp_path / "private", files), "pkg", edges=edges)
    assert len(problems) == 1 and "a private name imported from outside pkg.fam" in problems[0], problems
    # ... an edge goes one way ...
    files = dict(BASE_TREE)
    files["fam/_est.py"] += "from ..dom import Method\n"
    problems = check_layers(_tree(tmp_path / "reverse", files), "pkg", edges=edges)
    assert len(problems) == 1 and "along no declared edge" in problems[0], problems
    # ... and importlib hides it even when declared.
    files = dict(BASE_TREE)
    files["dom/_meth/_method.py"] += "import importlib\nE = importlib.import_module('pkg.fam').Estimator\n"
    problems = check_layers(_tree(tmp_path / "importlib", files), "pkg", edges=edges)
    assert len(problems) == 1 and "through importlib" in problems[0], problems


def test_a_third_party_module_may_load_through_importlib(tmp_path):
    files = dict(BASE_TREE)
    files["fam/_est.py"] += "import importlib\ndef f():\n    return importlib.import_module('open_clip')\n"
    assert check_layers(_tree(tmp_path, files), "pkg") == []


def test_the_cycle_finder_sees_module_level_cycles_only(tmp_path):
    assert import_cycles(_tree(tmp_path / "clean", BASE_TREE), "pkg") == []
    files = dict(BASE_TREE)
    # base <-> utils.training, as skicml had it before issue 56.
    files["base.py"] += "from .utils.training import fit\n"
    files["utils/training.py"] = "def fit():\n    pass\nfrom ..base import _check\n"
    assert import_cycles(_tree(tmp_path / "cycle", files), "pkg") == [
        "pkg.base -> pkg.utils.training -> pkg.base"
    ]
    # Through a package's __init__ (``from . import name`` imports the package).
    files = dict(BASE_TREE)
    files["fam/_model.py"] += "from . import Estimator\n"
    assert import_cycles(_tree(tmp_path / "init", files), "pkg") == [
        "pkg.fam -> pkg.fam._est -> pkg.fam._model -> pkg.fam"
    ]
    # An import inside a function runs when it is called: no cycle.
    files = dict(BASE_TREE)
    files["base.py"] += "from .utils.training import fit\n"
    files["utils/training.py"] = "def fit():\n    from ..base import _check\n"
    assert import_cycles(_tree(tmp_path / "lazy", files), "pkg") == []
    # Nor under ``if TYPE_CHECKING:``.
    files["utils/training.py"] = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..base import _check\n"
    assert import_cycles(_tree(tmp_path / "typing", files), "pkg") == []


# --------------------------------------------------------------------------
# ownership: a module of ops, nn or datasets that one family uses says so
# --------------------------------------------------------------------------
LAYERS_WITH_OWNERS = ("ops", "nn", "datasets")
OWNER_LINE = re.compile(r"Used by one family: ``(\w+)``")


def shared_layer_users(root=ROOT, prefix="skicml"):
    """``{module of ops/nn/datasets: the families that use it}``, from static imports.

    A name imported from a layer's package (``from ..nn import LlamaBlock``)
    counts for the module that defines it there; a module used by another
    module of the shared layers counts for that module's families too
    (``ops._ssd_scan`` through ``nn.mamba2``). Imports by the shared
    machinery (``utils``' test data, ``base``) are not a family's.
    """
    modules = _modules(root, prefix)
    known = set(modules)
    packages = {m for m, (_, is_package) in modules.items() if is_package}
    families = {_top(m) for m in packages if _top(m)} - SHARED
    defined = {}
    for layer in LAYERS_WITH_OWNERS:
        package = f"{prefix}.{layer}"
        if package in modules:
            for node in ast.parse(modules[package][0]).body:
                if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                    for alias in node.names:
                        defined[package, alias.asname or alias.name] = f"{package}.{node.module}"
    users = {m: set() for m in known}
    for name, (source, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in known:
                        users[alias.name].add(name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    module = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
                else:
                    module = node.module
                for alias in node.names:
                    child = f"{module}.{alias.name}"
                    target = child if child in known else defined.get((module, alias.name), module)
                    if target in known and target != name:
                        users[target].add(name)

    def family_users(module, seen):
        found = set()
        for user in users[module]:
            if user in seen or user == f"{prefix}.{_top(user)}" and _top(user) in LAYERS_WITH_OWNERS:
                continue  # a layer's __init__ re-exports, it does not use
            seen.add(user)
            if _top(user) in families:
                found.add(_top(user))
            elif _top(user) in LAYERS_WITH_OWNERS:
                found |= family_users(user, seen)
        return found

    return {
        m: family_users(m, {m}) for m in sorted(known)
        if _top(m) in LAYERS_WITH_OWNERS and m != f"{prefix}.{_top(m)}"
    }


def ownership_problems(root=ROOT, prefix="skicml"):
    modules = _modules(root, prefix)
    problems = []
    for module, families in shared_layer_users(root, prefix).items():
        claimed = OWNER_LINE.findall(ast.get_docstring(ast.parse(modules[module][0])) or "")
        if len(families) == 1 and claimed != sorted(families):
            problems.append(f"{module}: used by {sorted(families)[0]} alone; its docstring should say "
                            f"'Used by one family: ``{sorted(families)[0]}``', not {claimed}")
        elif len(families) > 1 and claimed:
            problems.append(f"{module}: says 'Used by one family: ``{claimed[0]}``' but {sorted(families)} use it")
    return problems


def test_single_family_modules_of_the_shared_layers_name_their_family():
    # Issue 56: a block one family uses is that family's to change; the line says whose.
    assert ownership_problems() == []


def test_the_ownership_check_follows_re_exports_and_layers(tmp_path):
    files = dict(BASE_TREE)
    files["ops/_kernel.py"] = '"""An op.\n\nUsed by one family: ``fam``.\n"""\nimport torch\nfrom . import _dispatch\n'
    files["nn/block.py"] = '"""A block."""\nfrom ..ops import op\n'
    files["datasets/_shapes.py"] = '"""Shapes.\n\nUsed by one family: ``fam``.\n"""\nimport numpy\n'
    root = _tree(tmp_path / "one", files)
    users = shared_layer_users(root, "pkg")
    # fam imports Block from the nn package; Block's module uses the op.
    assert users["pkg.nn.block"] == {"fam"} and users["pkg.ops._kernel"] == {"fam"}
    assert users["pkg.datasets._shapes"] == {"fam"} and users["pkg.ops._dispatch"] == {"fam"}
    assert ownership_problems(root, "pkg") == [
        "pkg.nn.block: used by fam alone; its docstring should say 'Used by one family: ``fam``', not []",
        "pkg.ops._dispatch: used by fam alone; its docstring should say 'Used by one family: ``fam``', not []",
    ]
    files["dom/_meth/_method.py"] += "from ...nn import Block\n"
    problems = ownership_problems(_tree(tmp_path / "two", files), "pkg")
    assert problems == ["pkg.ops._kernel: says 'Used by one family: ``fam``' but ['dom', 'fam'] use it"]


def test_the_ground_floor_stands_on_torch_and_numpy():
    # Issue 56: base.py and the training loop imported each other on their last
    # lines; both now stand on utils/_runtime.py, which stands on nothing of skicml
    # but the settings (utils/_config.py, the standard library alone) and, inside
    # functions, the package root (``skicml.__file__``; it imports no module).
    name = "skicml.utils._runtime"
    source, is_package = _modules(ROOT, "skicml")[name]
    tree = ast.parse(source)
    at_import = set()
    for node in _module_level_nodes(tree):
        if isinstance(node, ast.Import):
            at_import |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            at_import.add(node.module.partition(".")[0])
    assert at_import <= set(sys.stdlib_module_names) | {"__future__", "numpy", "torch"}, at_import
    skicml_imports = {target for target, _, _ in _imports(name, source, is_package, set(_modules(ROOT, "skicml")))
                      if target == "skicml" or target.startswith("skicml.")}
    assert skicml_imports <= {"skicml", "skicml.utils._config"}, skicml_imports
