"""The promises of the project files: README commands, CI, packaging, docs."""

import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from skicml.utils import all_estimators

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _readme_commands():
    text = (ROOT / "README.rst").read_text()
    return [line.strip() for line in text.splitlines() if line.strip().startswith("python3 -m venv")]


def test_readme_gives_install_and_test_commands():
    commands = _readme_commands()
    assert len(commands) == 2
    assert commands[0].endswith("skicml tour")
    assert ".[test" in commands[1] and "pytest" in commands[1]


def test_ci_runs_exactly_the_readme_test_command():
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert _readme_commands()[1] in ci_lines


def test_all_estimators_lists_public_classes_only():
    for name, cls in all_estimators():
        assert not name.startswith("_") and cls.__module__.startswith("skicml.")
    assert "_TinyMLPClassifier" not in dict(all_estimators())
    with pytest.raises(ValueError, match="type_filter"):
        all_estimators(type_filter="spaceship")


def test_no_runtime_downloads_in_package():
    """Only the published-model resolver downloads, and only through huggingface_hub and torch.hub."""
    pattern = re.compile(r"hf_hub_download|snapshot_download|download_url_to_file|urlretrieve|requests\.get\("
                         r"|urlopen\(")
    offenders = [
        str(path.relative_to(ROOT)) for path in (ROOT / "skicml").rglob("*.py")
        if pattern.search(path.read_text())
    ]
    assert offenders == ["skicml/_weights.py"]


def test_wheel_ships_package_data(tmp_path):
    """``python -m build`` puts shipped weights into the wheel."""
    pytest.importorskip("build")
    source = tmp_path / "src"
    source.mkdir()
    for name in ("setup.py", "setup.cfg", "MANIFEST.in", "README.rst"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "skicml", source / "skicml", ignore=shutil.ignore_patterns("__pycache__"))
    # A family with a weights file, as pretraining recipes write them.
    family = source / "skicml" / "probefamily"
    (family / "_weights").mkdir(parents=True)
    (family / "__init__.py").write_text("")
    (family / "_weights" / "probe.pt").write_bytes(b"\0" * 1024)
    # A method subpackage of a domain folder, as skicml/graph/_graphgpt/ is.
    method = family / "_method"
    (method / "_weights").mkdir(parents=True)
    (method / "_data" / "tables").mkdir(parents=True)
    (method / "__init__.py").write_text("")
    (method / "_weights" / "probe.pt").write_bytes(b"\0" * 1024)
    (method / "_data" / "tables" / "probe.csv").write_text("a,b\n1,2\n")
    result = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"),
         str(source)], capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("skicml-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "skicml/probefamily/_weights/probe.pt" in names
    assert "skicml/probefamily/_method/_weights/probe.pt" in names
    assert "skicml/probefamily/_method/_data/tables/probe.csv" in names
    shipped = sorted(
        path.relative_to(source).as_posix() for path in (source / "skicml").rglob("*")
        if path.is_file() and ({"_weights", "_data"} & set(path.relative_to(source).parts[:-1]))
    )
    assert "skicml/graph/_graphgpt/_weights/graphgpt_qm9_small.pt" in shipped
    assert [name for name in shipped if name not in names] == []
    assert "skicml/ops/_rms_norm_triton.py" in names
    assert any(n.endswith("entry_points.txt") for n in names)


@pytest.mark.slow
def test_docs_build_offline(tmp_path):
    pytest.importorskip("sphinx")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "-D", "plot_gallery=0",
         str(ROOT / "doc"), str(tmp_path / "html")], capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_readme_quick_start_runs(capsys):
    text = (ROOT / "README.rst").read_text()
    block = text.split(".. code-block:: python", 1)[1].split("\nOn a fresh machine", 1)[0]
    code = "\n".join(line[4:] for line in block.splitlines())
    exec(compile(code, "README.rst", "exec"), {})
    score = float(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0.5 < score <= 1.0


def test_readme_table_says_which_estimators_exist():
    """The README's estimator table marks a family available exactly when its
    estimators are installed (so it cannot promise what does not exist)."""
    text = (ROOT / "README.rst").read_text()
    table = text.split("Estimators\n----------\n", 1)[1].strip().split("\n\n", 1)[0]
    rows = table.splitlines()[3:-1]
    assert len(rows) == 12
    installed = set(dict(all_estimators())) | {"EulerTokenizer"}
    for row in rows:
        names = set(re.findall(r"``(\w+)``", row))
        available = row.rstrip().endswith(" yes")
        assert available or row.rstrip().endswith(" not yet"), row
        assert names, row
        if available:
            assert names <= installed, row
        else:
            assert not names & installed, row


def _modules_after(statement):
    """The top-level modules and skicml families a fresh interpreter holds after ``statement``."""
    code = f"{statement}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_import_skicml_loads_no_family():
    # Issue 28 (item 10): importing the package paid 4.6 s for every family,
    # scipy.stats and pandas included, before a user had asked for any.
    loaded = _modules_after("import skicml")
    assert not {"torch", "sklearn", "pandas", "scipy"} & loaded
    assert not [m for m in loaded if m.startswith("skicml.")]


@pytest.mark.parametrize("name, family", [
    ("TabICLClassifier", "tabicl"), ("WearableEncoder", "wearable"),
    ("GraphGPTRegressor", "graph"), ("WhitenedCLIPScorer", "clip"), ("ContextureEmbedding", "contexture"),
    # video -> clip is a declared edge, imported where the default embedder is built.
    ("ViLAMPCompressor", "video"),
])
def test_importing_a_flagship_loads_only_its_family(name, family):
    loaded = _modules_after(f"from skicml import {name}")
    families = {m.split(".")[1] for m in loaded if m.startswith("skicml.")} - {"_weights", "base", "utils", "nn", "ops",
                                                                               "datasets"}
    assert families == {family}


def test_lazy_names_resolve_like_attributes():
    import skicml
    from skicml.tabicl import TabICLClassifier

    assert skicml.TabICLClassifier is TabICLClassifier
    assert skicml.tabicl.TabICLClassifier is TabICLClassifier
    assert set(skicml.__all__) <= set(dir(skicml))
    with pytest.raises(AttributeError, match="no attribute 'NotAnEstimator'"):
        skicml.NotAnEstimator  # noqa: B018


def test_every_subpackage_is_found_not_listed():
    # Issue 56: the hand list of subpackages had no vlm, so skicml.vlm raised AttributeError.
    import importlib

    import skicml

    folders = sorted(
        path.name for path in (ROOT / "skicml").iterdir()
        if (path / "__init__.py").is_file() and not path.name.startswith("_")
    )
    assert "vlm" in folders and "video" in folders
    assert skicml._SUBPACKAGES == folders
    assert set(folders) <= set(dir(skicml))
    # Called directly: once imported, the import system sets the attribute itself.
    assert skicml.__getattr__("vlm") is importlib.import_module("skicml.vlm")


def test_a_shipped_name_loads_before_its_family_is_imported():
    # The registry fills as families import; a lookup by name must not depend on it.
    code = ("from skicml._weights import load_weights\n"
            "print(sorted(load_weights('wearable-core-small')['config'])[:1])")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def _python_snippets(text):
    """``(line, code)`` of each literal block of an rst file that parses as Python."""
    import ast
    import textwrap

    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].rstrip().endswith("::") or lines[i].strip() == ".. code-block:: python":
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith("   ")):
                j += 1
            code = textwrap.dedent("\n".join(lines[i + 1:j]))
            try:
                yield i + 1, ast.parse(code)
            except SyntaxError:
                pass  # a shell command, a table or a formula
            i = j
        else:
            i += 1


def test_every_documented_snippet_is_seeded():
    # Issue 28 (item 14): the user guide's QM9 snippet gave 0.385 and then 0.361 eV.
    import ast

    from sklearn.utils import get_tags

    classes = dict(all_estimators())

    def differs_unseeded(name, keywords):
        """Whether ``name(**keywords)`` gives results that differ from run to run
        unless seeded: its tags, with the call's literal arguments (a
        ``pretrained=`` teacher is not trained from a random start)."""
        literal = {}
        for keyword in keywords:
            try:
                literal[keyword.arg] = ast.literal_eval(keyword.value)
            except ValueError:
                pass  # a variable: the default stands in for it
        try:
            estimator = classes[name](**literal)
        except TypeError:
            estimator = classes[name]()
        return get_tags(estimator).non_deterministic

    unseeded = []
    for path in [ROOT / "README.rst", *sorted((ROOT / "doc").glob("*.rst"))]:
        for line, tree in _python_snippets(path.read_text()):
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", getattr(node.func, "attr", None))
                    keywords = [k for k in node.keywords if k.arg is not None]
                    if (name in classes and "random_state" not in {k.arg for k in keywords}
                            and differs_unseeded(name, keywords)):
                        unseeded.append(f"{path.name}:{line + node.lineno}: {name}(...)")
    assert not unseeded, "snippets without random_state: " + ", ".join(unseeded)


def test_the_install_page_lists_every_extra_and_what_it_brings():
    """doc/install.rst's extras table names each extra of setup.py and each package it installs."""
    import ast
    import re

    tree = ast.parse((ROOT / "setup.py").read_text())
    extras = next(ast.literal_eval(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "EXTRAS")
    page = (ROOT / "doc" / "install.rst").read_text()
    table = page.split(".. list-table::", 1)[1].split("\n\n", 2)[1]
    rows = re.split(r"\n   \* - ", "\n" + table)[1:]
    listed = {}
    for row in rows:
        name, _, rest = row.partition("\n")
        listed[name.strip().strip("`")] = rest
    assert set(extras) | {"all"} <= set(listed), f"extras missing from doc/install.rst: {set(extras) - set(listed)}"
    for extra, requirements in extras.items():
        for requirement in requirements:
            package = re.split(r"[<>=;\[ ]", requirement, maxsplit=1)[0]
            assert f"``{package.removesuffix('_torch')}" in listed[extra], (extra, package)
