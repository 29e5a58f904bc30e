"""The point-cloud family's row of ``skicml tour``."""

import time

from ..utils.tour import TourEntry

_N_POINTS = 256
_PER_CLASS = 40


def _run():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from ..datasets import make_point_clouds
    from ._classifier import GAPromptClassifier
    from ._features import ShapeDistributionFeatures

    # Ten shapes on a floor with clutter, cut by a half-space and holed; test
    # clouds have rotations, cuts and holes no training cloud had.
    train = make_point_clouds(10 * _PER_CLASS, n_points=_N_POINTS, variant="hardest", random_state=0)
    test = make_point_clouds(10 * _PER_CLASS, n_points=_N_POINTS, variant="hardest", random_state=1)
    # A brief fine-tune (2 epochs, 16 point groups: about 15 CPU-s); 6 epochs of 32 groups took 108 s and
    # scored 0.41 (doc/performance.rst, "The tour").
    model = GAPromptClassifier(pretrained="tiny-pointmae", n_points=_N_POINTS, n_groups=16, max_epochs=2,
                               lr=1e-3, warmup_epochs=1, device="cpu", random_state=0)
    start = time.perf_counter()
    score = model.fit(train.points, train.target).score(test.points, test.target)
    seconds = time.perf_counter() - start
    baseline = make_pipeline(ShapeDistributionFeatures(n_points=_N_POINTS), StandardScaler(),
                             LogisticRegression(max_iter=2000))
    baseline_score = baseline.fit(train.points, train.target).score(test.points, test.target)
    return {"score": score, "baseline_score": baseline_score, "seconds": seconds}


def tour_entries():
    return [TourEntry("GAPromptClassifier", f"occluded shapes in clutter, 10 classes, {_N_POINTS} points, 2 epochs",
                      "accuracy (higher is better)", "D2 shape histograms + LR", _run)]
