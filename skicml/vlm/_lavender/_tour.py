"""Lavender's row of ``skicml tour``."""

import time

from ...utils.tour import TourEntry

N_TRAIN, N_TEST = 96, 60


def _run():
    from ...datasets import make_object_scenes
    from ._diffusion_teacher import TinyDiffusionTeacher
    from ._tuner import LavenderTuner

    # Fine-tuning on biased scenes, as tiny-vlm-scenes was pretrained; held-out captions of unbiased ones.
    images, captions, _ = make_object_scenes(N_TRAIN, cooccurrence=0.8, random_state=1)
    test_images, test_captions, _ = make_object_scenes(N_TEST, cooccurrence=0.0, random_state=2)
    settings = dict(max_epochs=1, batch_size=32, lr=2e-3, random_state=0)
    start = time.perf_counter()
    teacher = TinyDiffusionTeacher(pretrained="tiny-diffusion-scenes").fit()
    lavender = LavenderTuner(teacher=teacher, **settings).fit(images, captions)
    score = lavender.score(test_images, test_captions)
    seconds = time.perf_counter() - start
    plain = LavenderTuner(align_weight=0.0, **settings).fit(images, captions)
    return {"score": score, "baseline_score": plain.score(test_images, test_captions), "seconds": seconds}


def tour_entries():
    return [TourEntry("LavenderTuner", f"caption fine-tuning on {N_TRAIN} scenes, {N_TEST} held out "
                      "(tiny-vlm-scenes, tiny-diffusion-scenes teacher)", "log-likelihood per token",
                      "plain LoRA fine-tuning", _run)]
