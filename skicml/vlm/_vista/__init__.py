"""VISTA (Li et al., ICML 2025): visual steering against hallucination in causal VLMs.

Re-exported by :mod:`skicml.vlm`; import from there.
"""

from ._presets import VISTA_PRESETS
from ._steerer import VISTASteerer, VisualSteeringVector

__all__ = ["VISTA_PRESETS", "VISTASteerer", "VisualSteeringVector"]
