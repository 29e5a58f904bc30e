"""The reference predictors: the oracle follows the law in and out of distribution, the case-based one copies."""

import numpy as np
import pytest

from skicml.datasets import make_physics_videos
from skicml.video import CaseBasedVideoPredictor, PhysicsOraclePredictor, velocity_error


@pytest.fixture(scope="module")
def train():
    return make_physics_videos("uniform", (13, 3), sampling="grid", n_frames=12, random_state=0)


@pytest.mark.parametrize("scenario, v_range", [("uniform", (1.0, 4.0)), ("uniform", (4.5, 6.0)),
                                               ("parabola", (1.0, 4.0)), ("collision", (1.0, 4.0))])
def test_oracle_error_is_the_parse_floor_in_and_out_of_distribution(scenario, v_range):
    data = make_physics_videos(scenario, 8, v_range=v_range, n_frames=20, min_pre=8, min_post=8,
                               resolution=32, random_state=1)
    oracle = PhysicsOraclePredictor().fit(data.videos[:, :3], data.videos[:, 3:])
    future = oracle.predict(data.videos[:, :3])
    assert future.shape == data.videos[:, 3:].shape and future.dtype == np.uint8
    errors = velocity_error(future, data.params, scenario, states_true=data.states)
    worst = errors.filter(like="vel_err").max().max()
    assert worst < 0.02


def test_case_based_copies_training_futures_and_snaps_to_the_nearest_speed(train):
    X, y = train.videos[:, :3], train.videos[:, 3:]
    model = CaseBasedVideoPredictor().fit(X, y)
    np.testing.assert_array_equal(model.predict(X), y)
    fast = make_physics_videos("uniform", 6, v_range=(5.0, 6.0), n_frames=12, random_state=2)
    copied = model.predict(fast.videos[:, :3])
    errors = velocity_error(copied, fast.params, "uniform", states_true=fast.states)
    # The fastest training speed is 4: the copy is at most that fast.
    assert (errors["vel_error"] > fast.params["v1"] - 4.0 - 0.35).all()
    distances, index = model.kneighbors(fast.videos[:, :3], n_neighbors=2)
    assert distances.shape == index.shape == (6, 2)


def test_flattened_rows_with_frame_shape_equal_the_5d_path(train):
    X, y = train.videos[:, :3], train.videos[:, 3:]
    rows = X.reshape(len(X), -1)
    flat = CaseBasedVideoPredictor(frame_shape=(32, 32, 3), metric="state", align="translate")
    flat.fit(rows, y.reshape(len(y), -1))
    full = CaseBasedVideoPredictor(metric="state", align="translate").fit(X, y)
    np.testing.assert_array_equal(flat.predict(rows).reshape(y.shape), full.predict(X))
    oracle = PhysicsOraclePredictor(frame_shape=(32, 32, 3)).fit(rows, y.reshape(len(y), -1))
    assert oracle.predict(rows[:2]).shape == (2, 9 * 32 * 32 * 3)


def test_bad_inputs(train):
    X, y = train.videos[:, :3], train.videos[:, 3:]
    model = CaseBasedVideoPredictor().fit(X, y)
    with pytest.raises(ValueError, match="fitted on"):
        model.predict(X[:, :2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        CaseBasedVideoPredictor().fit(X.astype(float) * 2, y)
    with pytest.raises(ValueError, match="whole number of frames"):
        CaseBasedVideoPredictor(frame_shape=(32, 32, 3)).fit(np.zeros((4, 100)), np.zeros(4))
    with pytest.raises(ValueError, match="video frames"):
        CaseBasedVideoPredictor(metric="state").fit(np.zeros((4, 5)), np.zeros(4))
    with pytest.raises(ValueError, match="clips but y"):
        PhysicsOraclePredictor().fit(X, y[:3])


# ------------------------------------------------------------------ issue 64
def test_the_oracle_warns_about_clips_it_cannot_read(train):
    X, y = train.videos[:, :3], train.videos[:, 3:]
    oracle = PhysicsOraclePredictor().fit(X, y)
    blank = np.full_like(X[:3], 255)
    with pytest.warns(UserWarning, match=r"3 of 3 clips .*no object of colors=\('red', 'blue'\).*blank"):
        oracle.predict(blank)
    from skicml.datasets import render_videos
    green = render_videos(train.states[:2, :3], train.params[["r1"]].to_numpy()[:2], colors=["green"],
                          resolution=X.shape[2])
    with pytest.warns(UserWarning, match=r"2 of 2 clips .*other colours.*colors="):
        oracle.predict(green)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        oracle.predict(X[:4])


def test_the_oracle_warns_that_one_conditioning_frame_shows_no_motion(train):
    X, y = train.videos[:, :1], train.videos[:, 1:4]
    with pytest.warns(UserWarning, match="one conditioning frame.*at rest"):
        oracle = PhysicsOraclePredictor().fit(X, y)
    with pytest.warns(UserWarning, match="one conditioning frame.*at rest"):
        oracle.predict(X[:2])
