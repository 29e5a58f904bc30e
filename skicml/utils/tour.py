"""What a method family contributes to ``skicml tour``."""

import importlib
from dataclasses import dataclass, field

__all__ = ["TourEntry"]


@dataclass
class TourEntry:
    """One row of ``skicml tour``: a method and the baseline it is compared to.

    ``run()`` fits both on offline data and returns a dict with ``score``
    (the method), ``baseline_score``, and optionally ``seconds`` (the
    method's own fit and predict; the tour measures the whole row's wall
    time itself, prints it as the row ends and in the table's ``row
    seconds`` column). A row that
    needs an optional extra names the modules it imports in ``requires`` and
    the extra in ``extra``: where they cannot be imported, the tour reports
    the row as skipped instead of running it.
    """

    method: str
    task: str
    metric: str
    baseline: str
    run: callable = field(repr=False)
    requires: tuple = ()
    extra: str = ""

    def missing_requirements(self):
        """Names in ``requires`` that cannot be imported here (absent or broken installs)."""
        missing = []
        for name in self.requires:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - a broken extra (e.g. a torchvision of another torch) counts as absent
                missing.append(name)
        return missing
