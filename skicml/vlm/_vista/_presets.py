"""The published VISTA settings, per model and task (paper sections 3.1-3.2, official run scripts).

The strengths are tuned per model on 100 held-out COCO images; the safe
range is narrow (captions collapse above about 0.15 on LLaVA-1.5 and
Shikra), so a preset is a starting point for a grid search with
:meth:`VISTASteerer.score`, not a guarantee. ``sla_layers`` follows the
official ``--logits-layers 25,30``: layers 25 to 30 inclusive (0-based) of
the 32 of a 7B model, the six below the top.
"""

__all__ = ["VISTA_PRESETS"]

_SEVEN_B_WINDOW = dict(sla_gamma=0.3, sla_layers=(25, 30))

#: Keyword arguments of :class:`VISTASteerer`, by model (open-ended captions, CHAIR and MMHal)
#: and for yes/no questions (``"pope"``, any model: a small strength keeps answers intact).
VISTA_PRESETS = {
    "llava-1.5": dict(vsv_lambda=0.17, **_SEVEN_B_WINDOW),
    "minigpt-4": dict(vsv_lambda=0.10, **_SEVEN_B_WINDOW),
    "shikra": dict(vsv_lambda=0.12, **_SEVEN_B_WINDOW),
    "instructblip": dict(vsv_lambda=0.17, **_SEVEN_B_WINDOW),
    "pope": dict(vsv_lambda=0.01, sla_gamma=0.3),
}
