"""VISTA's row of ``skicml tour``."""

import time

from ...utils.tour import TourEntry

N_SCENES = 100


def _run():
    from ...datasets import make_object_scenes
    from ._steerer import VISTASteerer

    # Unbiased scenes: the partners the shipped model learnt to expect are not there.
    images, _, objects = make_object_scenes(N_SCENES, cooccurrence=0.0, random_state=9001)
    truth = objects.groupby("scene")["name"].apply(set).tolist()
    start = time.perf_counter()
    steered = VISTASteerer(vsv_lambda=0.05, sla_gamma=0.1, batch_size=100, random_state=0).fit()
    score = -steered.chair_report(images, truth)["chair_i"]
    seconds = time.perf_counter() - start
    plain = VISTASteerer(vsv=False, sla=False, batch_size=100, random_state=0).fit()
    return {"score": score, "baseline_score": -plain.chair_report(images, truth)["chair_i"], "seconds": seconds}


def tour_entries():
    return [TourEntry("VISTASteerer", f"captions of {N_SCENES} unbiased object scenes (tiny-vlm-scenes)",
                      "-CHAIR_I", "plain greedy decoding", _run)]
