"""The official ``tabicl==2.2.0``, importable beside the ``tabicl`` 0.1.4 of the v1 parity tests.

Both have the import name ``tabicl``, so 2.2.0 is installed in a folder of
its own (``pip install --no-deps --target .venv/tabicl-2.2.0 tabicl==2.2.0``,
or the folder ``$SKICML_TABICL2_PATH``). :class:`Official` swaps the
``tabicl*`` entries of ``sys.modules`` (and ``sys.path``) for the 2.2.0 ones
while its code runs, and back after, so both versions live in one pytest
process and official code that imports lazily at call time finds its own
version. Test modules call :func:`official_or_skip` at import time.
"""

import contextlib
import os
import sys
from pathlib import Path

import pytest

VERSION = "2.2.0"
_ROOT = Path(__file__).resolve().parents[2]


def is_tabicl(name):
    """Whether a ``sys.modules`` key belongs to a ``tabicl`` package."""
    return name == "tabicl" or name.startswith("tabicl.")


def dist_version(path):
    """The ``tabicl`` version installed in the folder ``path`` (from its dist-info)."""
    found = sorted(Path(path).glob("tabicl-*.dist-info"))
    return found[0].name[len("tabicl-"):-len(".dist-info")] if found else "unknown"


class Official:
    """``tabicl`` 2.2.0's modules, usable beside another ``tabicl`` in ``sys.modules``.

    Attributes
    ----------
    TabICL, InferenceConfig, QuantileDistribution : the official network classes
    TabICLClassifier, TabICLRegressor : the official estimators
    """

    def __init__(self, path):
        self.path = str(path)
        self.modules = {}
        with self.active():
            import tabicl
            import tabicl._model.inference_config
            import tabicl._model.quantile_dist
            import tabicl._model.tabicl
            import tabicl._sklearn.classifier
            import tabicl._sklearn.regressor

            assert tabicl.__file__.startswith(self.path)
            self.TabICL = tabicl._model.tabicl.TabICL
            self.InferenceConfig = tabicl._model.inference_config.InferenceConfig
            self.QuantileDistribution = tabicl._model.quantile_dist.QuantileDistribution
            self.TabICLClassifier = tabicl._sklearn.classifier.TabICLClassifier
            self.TabICLRegressor = tabicl._sklearn.regressor.TabICLRegressor

    @contextlib.contextmanager
    def active(self):
        """Within: ``import tabicl`` is 2.2.0; after: whatever it was before."""
        saved = {name: module for name, module in sys.modules.items() if is_tabicl(name)}
        for name in saved:
            del sys.modules[name]
        sys.modules.update(self.modules)
        sys.path.insert(0, self.path)
        try:
            yield
        finally:
            sys.path.remove(self.path)
            for name in [name for name in sys.modules if is_tabicl(name)]:
                self.modules[name] = sys.modules.pop(name)
            sys.modules.update(saved)

    def inference_config(self):
        """float32 on the CPU: the official default autocasts to bfloat16."""
        config = self.InferenceConfig()
        config.update_from_dict({key: {"use_amp": False} for key in ("COL_CONFIG", "ROW_CONFIG", "ICL_CONFIG")})
        return config


def official_or_skip():
    """:class:`Official` for the installed 2.2.0, or skip the calling test module."""
    path = Path(os.environ.get("SKICML_TABICL2_PATH") or _ROOT / ".venv" / f"tabicl-{VERSION}")
    if not (path / "tabicl" / "_model" / "tabicl.py").is_file():
        pytest.skip(f"parity needs tabicl=={VERSION} in {path} (pip install --no-deps --target "
                    f".venv/tabicl-{VERSION} tabicl=={VERSION}, or set SKICML_TABICL2_PATH)",
                    allow_module_level=True)
    if dist_version(path) != VERSION:
        pytest.skip(f"{path} holds tabicl {dist_version(path)}, not {VERSION}", allow_module_level=True)
    return Official(path)
