"""What a method family contributes to ``skicml tour``."""

from dataclasses import dataclass, field

__all__ = ["TourEntry"]


@dataclass
class TourEntry:
    """One row of ``skicml tour``: a method and the baseline it is compared to.

    ``run()`` fits both on offline data and returns a dict with ``score``
    (the method), ``baseline_score``, and optionally ``seconds``.
    """

    method: str
    task: str
    metric: str
    baseline: str
    run: callable = field(repr=False)
