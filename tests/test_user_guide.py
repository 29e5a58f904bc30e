"""The user guide's code runs as written.

Every ``.. code-block:: python`` of ``doc/*.rst`` is executed, the blocks of
one page in order and in one namespace (a later block may use an earlier
one's names), from a temporary folder. An rst comment just above a block
says when it cannot run as a test, with its reason:

- ``.. doc-test: slow, <why>``: it runs for minutes (a real fit); it runs
  with ``pytest -m slow``;
- ``.. doc-test: skip, <why>``: it needs what no test machine has (a
  checkpoint on disk, a GPU), or it is a pattern with ``...`` in it.

Python written in a plain literal block (``::``) would escape all this, so
a literal block that starts with an import is refused.
"""

import os
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "doc"
_DIRECTIVE = re.compile(r"^\.\. code-block:: python\s*$")
_MARKER = re.compile(r"^\.\. doc-test: (slow|skip), (\S.*)$")


def code_blocks(text):
    """``(code, marker, reason, line)`` of each python code block of an rst page."""
    lines = text.splitlines()
    blocks = []
    for index, line in enumerate(lines):
        if not _DIRECTIVE.match(line):
            continue
        marker = reason = None
        previous = [candidate for candidate in lines[max(0, index - 3):index] if candidate.strip()]
        if previous and (found := _MARKER.match(previous[-1].strip())):
            marker, reason = found.groups()
        body = []
        for candidate in lines[index + 1:]:
            if candidate.strip() and not candidate.startswith((" ", "\t")):
                break
            body.append(candidate)
        indent = min((len(b) - len(b.lstrip()) for b in body if b.strip()), default=0)
        blocks.append(("\n".join(b[indent:] for b in body).strip("\n"), marker, reason, index + 1))
    return blocks


def python_literal_blocks(text):
    """Line numbers of the ``::`` literal blocks of a page whose first line is a Python import."""
    lines = text.splitlines()
    found = []
    for index, line in enumerate(lines):
        if not line.rstrip().endswith("::") or line.lstrip().startswith(".."):
            continue
        first = next((candidate.strip() for candidate in lines[index + 1:] if candidate.strip()), "")
        if first.startswith(("from ", "import ")) and lines[index + 1:] and not lines[index + 1].strip():
            found.append(index + 1)
    return found


def test_python_is_written_in_code_blocks_that_run():
    pages = {page.name: python_literal_blocks(page.read_text()) for page in sorted(DOC.glob("*.rst"))}
    offending = {name: lines for name, lines in pages.items() if lines}
    assert not offending, f"write these as '.. code-block:: python' so they are run: {offending}"
    assert python_literal_blocks("Text::\n\n    import numpy\n") == [1]


def _pages():
    """One test per page; a page with slow blocks gets a second, slow test that runs them all."""
    params = []
    for page in sorted(DOC.glob("*.rst")):
        blocks = code_blocks(page.read_text())
        if not blocks:
            continue
        params.append(pytest.param(page, blocks, False, id=page.stem))
        if any(marker == "slow" for _, marker, _, _ in blocks):
            params.append(pytest.param(page, blocks, True, id=f"{page.stem}-all", marks=pytest.mark.slow))
    return params


def test_markers_are_read_with_their_reasons():
    text = ("Intro\n\n.. doc-test: skip, needs a checkpoint\n\n.. code-block:: python\n\n    x = 1\n    y = x + 1\n\n"
            "Next\n\n.. code-block:: python\n\n    z = y\n")
    blocks = code_blocks(text)
    assert [(code, marker, reason) for code, marker, reason, _ in blocks] == [
        ("x = 1\ny = x + 1", "skip", "needs a checkpoint"), ("z = y", None, None)]


@pytest.mark.parametrize(("page", "blocks", "with_slow"), _pages())
def test_the_pages_code_runs_as_written(page, blocks, with_slow, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"doc_{page.stem}"}
    for code, marker, reason, line in blocks:
        if marker is not None:
            assert reason.strip(), f"{page.name}:{line}: a {marker} block says why"
        if marker == "skip" or (marker == "slow" and not with_slow):
            continue
        try:
            exec(compile(code, f"{page.name}:{line}", "exec"), namespace)
        except Exception as error:  # noqa: BLE001 - name the page and the block's line
            raise AssertionError(f"{page.name}, the block at line {line}, fails: {error!r}") from error
