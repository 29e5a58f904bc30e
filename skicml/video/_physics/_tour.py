"""The physics world-model testbed's row of ``skicml tour``."""

import time

from ...utils.tour import TourEntry

_N_CLIPS = 24


def _run():
    import numpy as np

    from ...datasets import make_physics_videos
    from ._evaluation import velocity_error
    from ._world_model import VideoWorldModel

    # In-distribution clips rolled out by the shipped 32-px model; the
    # baseline predicts that nothing moves.
    data = make_physics_videos("uniform", _N_CLIPS, n_frames=8, min_frames_in_view=8, random_state=1)
    params, states = data.params, data.states
    X, y = data.videos[:, :3], data.videos[:, 3:]
    start = time.perf_counter()
    model = VideoWorldModel(pretrained="physics-world-model-uniform32", max_epochs=0, n_sampling_steps=10,
                            device="cpu", random_state=0).fit(X, y)
    future = model.predict(X)
    seconds = time.perf_counter() - start
    still = np.repeat(X[:, -1:], y.shape[1], axis=1)

    def error(frames):
        return float(velocity_error(frames, params, "uniform", states_true=states)["vel_error"].mean())

    return {"score": error(future), "baseline_score": error(still), "seconds": seconds}


def tour_entries():
    return [TourEntry("VideoWorldModel", f"uniform motion, 32 px, {_N_CLIPS} in-distribution clips, 5 frames "
                      "generated from 3", "velocity error, units/s (lower is better)", "copy the last frame", _run)]
