"""The Examples sections of the wearable family's docstrings run as written."""

import doctest
import importlib

import pytest

MODULES = [
    "skicml.datasets._wearable",
    "skicml.wearable._encoder",
    "skicml.wearable._evaluation",
    "skicml.wearable._features",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
