"""The Race-DiT family's row of ``skicml tour``."""

import time

from ..utils.tour import TourEntry

_SAMPLES_PER_CLASS = 20


def _run():
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.mixture import GaussianMixture

    from ._generator import RaceDiTGenerator
    from ._metrics import sample_quality

    digits = load_digits()
    images, labels = digits.images[:1500], digits.target[:1500]
    wanted = np.repeat(np.arange(10), _SAMPLES_PER_CLASS)
    # The shipped model (``skicml pretrain race-dit-digits``), fine-tuned for one short epoch, as a user
    # adapting it would; training from scratch to the same quality takes minutes.
    model = RaceDiTGenerator(pretrained="race-dit-digits", max_epochs=1, lr=1e-4, random_state=0, device="cpu")
    start = time.perf_counter()
    samples = model.fit(images, labels).sample(len(wanted), y=wanted, guidance_scale=3.0, n_steps=50,
                                               random_state=0)
    seconds = time.perf_counter() - start
    # The baseline: one full-covariance Gaussian per class on the pixels.
    baseline = np.concatenate([
        GaussianMixture(1, reg_covar=1e-2, random_state=0).fit(images[labels == c].reshape(-1, 64))
        .sample(_SAMPLES_PER_CLASS)[0].clip(0, 16) for c in range(10)])
    score = sample_quality(samples, wanted, images, labels)["classifier_accuracy"]
    baseline_score = sample_quality(baseline, wanted, images, labels)["classifier_accuracy"]
    return {"score": score, "baseline_score": baseline_score, "seconds": seconds}


def tour_entries():
    return [TourEntry("RaceDiTGenerator", "digits, 200 class-conditional samples (shipped model, 1 epoch of 1,500)",
                      "class accuracy of samples (higher is better)", "a Gaussian per class", _run)]
