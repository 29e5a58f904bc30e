"""Physics read back from frames: unbiased sub-pixel parsing, velocity errors, the case-based analyses."""

import numpy as np
import pandas as pd
import pytest

from skicml.datasets import make_attribute_pair_split, make_physics_eval, make_physics_videos, render_videos
from skicml.video import (
    attribute_priority_report,
    infer_attributes,
    nearest_training_case,
    parse_object_states,
    summarize_by_bucket,
    velocity_error,
    video_similarity,
)


def _in_view(states, radii):
    x, y, r = states[..., 0], states[..., 1], radii[:, None]
    return (x - r >= 0) & (x + r <= 10) & (y - r >= 0) & (y + r <= 10)


@pytest.mark.parametrize("resolution", [32, 64, 128])
def test_render_then_parse_recovers_positions_without_bias(resolution):
    data = make_physics_videos("uniform", 40 if resolution < 128 else 12, resolution=resolution, random_state=0)
    parsed = parse_object_states(data.videos, colors=["red"])[:, :, 0]
    truth, radii = data.states[:, :, 0], data.params["r1"].to_numpy()
    inside = _in_view(truth, radii)
    error = (parsed[..., :2] - truth)[inside]
    pixel = 10 / resolution
    assert np.abs(error.mean(axis=0)).max() < 0.002 * pixel * 32  # unbiased: far below a pixel
    assert np.abs(error).max() < 0.05 * pixel                      # sub-pixel: a twentieth of one
    np.testing.assert_allclose(parsed[..., 2][inside], np.broadcast_to(radii[:, None], inside.shape)[inside],
                               rtol=0.01)


def test_ground_truth_velocity_error_floor_and_the_official_convention():
    data = make_physics_videos("uniform", 60, resolution=32, random_state=1)
    ours = velocity_error(data.videos, data.params, "uniform", states_true=data.states)["vel_error"].mean()
    threshold = velocity_error(parse_object_states(data.videos, colors=["red"], method="threshold"), data.params,
                               "uniform", states_true=data.states)["vel_error"].mean()
    official_videos = render_videos(data.states, data.params[["r1"]].to_numpy(), colors=["red"], resolution=32,
                                    antialias="soft_disc", pixel_convention="official")
    official = parse_object_states(official_videos, colors=["red"], method="threshold", pixel_convention="official")
    official_error = velocity_error(official, data.params, "uniform", states_true=data.states)["vel_error"].mean()
    assert ours < 0.002 and threshold < 0.02
    # The (W - 1) / W bias: v * 1/32, about 0.08 at the mean speed 2.5.
    assert 0.06 < official_error < 0.1


def test_absent_objects_are_nan_or_filled_like_the_official_parser():
    states = np.array([[[[5.0, 5.0]], [[np.nan, np.nan]]]])
    videos = render_videos(states, [1.0], colors=["blue"], resolution=32)
    parsed = parse_object_states(videos, colors=["blue", "red"])
    assert np.isnan(parsed[0, 1, 0]).all() and np.isnan(parsed[0, :, 1]).all()
    filled = parse_object_states(videos, colors=["blue"], fill="official")
    assert filled[0, 1, 0, 0] == 0.0 and filled[0, 1, 0, 1] == pytest.approx(5.0, abs=1e-3)


def test_touching_balls_parse_independently():
    states = np.array([[[[4.0, 5.0], [6.0, 5.0]]]])      # radii 1 and 1: in contact
    parsed = parse_object_states(render_videos(states, [1.0, 1.0], resolution=64))[0, 0]
    np.testing.assert_allclose(parsed[:, :2], [[4.0, 5.0], [6.0, 5.0]], atol=1e-3)


def test_parse_refuses_bad_input():
    with pytest.raises(ValueError, match="n_videos, n_frames"):
        parse_object_states(np.zeros((2, 8, 8, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match="colors"):
        parse_object_states(np.zeros((1, 1, 8, 8, 3), dtype=np.uint8), colors=["purple"])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        parse_object_states(np.full((1, 1, 8, 8, 3), 2.0))
    with pytest.raises(ValueError, match="empty"):
        parse_object_states(np.zeros((0, 1, 8, 8, 3), dtype=np.uint8))


def test_collision_errors_of_the_truth_are_small_and_of_a_wrong_law_are_not():
    data = make_physics_videos("collision", 20, resolution=64, random_state=0)
    truth = velocity_error(data.videos, data.params, "collision", states_true=data.states)
    assert truth[["pre_vel_err", "post_vel_err"]].max().max() < 0.01
    assert truth["momentum_err"].max() < 0.02 and truth["energy_err"].max() < 0.05
    assert (truth["collision_frame"] >= 7).all()
    # The parsed mean velocities: the initial ones before, the elastic law's after (masses r^2).
    p = data.params
    m1, m2, u1, u2 = p["r1"] ** 2, p["r2"] ** 2, p["vx1"], p["vx2"]
    np.testing.assert_allclose(truth[["pre_vx1", "pre_vx2"]], p[["vx1", "vx2"]], atol=0.01)
    np.testing.assert_allclose(truth["post_vx1"], ((m1 - m2) * u1 + 2 * m2 * u2) / (m1 + m2), atol=0.01)
    np.testing.assert_allclose(truth["post_vx2"], ((m2 - m1) * u2 + 2 * m1 * u1) / (m1 + m2), atol=0.01)
    # Balls that pass through each other keep their velocities: the post errors show it.
    ghost = data.params.assign(x2=data.params["x2"] + 100.0)
    passing = data.states.copy()
    passing[..., 0] = data.params[["x1", "x2"]].to_numpy()[:, None, :] + \
        data.params[["vx1", "vx2"]].to_numpy()[:, None, :] * (0.01 + 0.1 * np.arange(32))[None, :, None]
    wrong = velocity_error(np.concatenate([passing, np.ones(passing.shape[:-1] + (1,))], -1), data.params,
                           "collision", states_true=data.states)
    assert wrong["post_vel_err"].mean() > 0.5
    assert len(ghost) == len(data.params)


def test_buckets_are_carried_and_summarised():
    data = make_physics_eval("uniform", n_per_bucket=4, resolution=32, random_state=0)
    errors = velocity_error(data.videos, data.params, "uniform", states_true=data.states)
    summary = summarize_by_bucket(errors)
    assert set(summary.index) == {"id", "r_out", "v_out", "rv_out", "zero"}
    assert summary[("vel_error", "mean")].max() < 0.02           # the truth is at the floor in every bucket
    with pytest.raises(ValueError, match="bucket"):
        summarize_by_bucket(errors.drop(columns="bucket"))


def test_nearest_case_and_attribute_inference():
    train = pd.DataFrame({"v1": np.linspace(1, 4, 7), "r1": 1.0})
    index, distance = nearest_training_case(pd.DataFrame({"v1": [0.2, 2.4, 6.0], "r1": [1.0, 1.0, 1.0]}), train)
    assert index.tolist() == [0, 3, 6]
    data = make_physics_videos("uniform", 6, resolution=64, color="blue", shape="circle", random_state=0)
    attributes = infer_attributes(data.videos, n_cond_frames=3)
    assert (attributes["color"] == "blue").all() and (attributes["shape"] == "circle").all()
    np.testing.assert_allclose(attributes["velocity"], data.params["v1"], atol=0.01)
    np.testing.assert_allclose(attributes["size"], data.params["r1"], rtol=0.01)
    ring = make_physics_videos("uniform", 2, resolution=64, shape="ring", r_range=(1.3, 1.4), random_state=0)
    assert (infer_attributes(ring.videos)["shape"] == "ring").all()


def test_attribute_priority_report_on_generations_that_follow_each_attribute():
    split = make_attribute_pair_split(("color", "size"), grid=(3, 3))
    test = split.test
    keep_colour = test.rename(columns={"color1": "color", "r1": "size", "v1": "velocity", "shape1": "shape"})
    keep_colour["size"] = np.where(keep_colour["color"] == "red", 0.8, 1.3)   # size follows the colour's case
    report = attribute_priority_report(keep_colour, test, split.pair, split.levels)
    assert (report["kept_a"] == 1.0).all() and (report["priority"] == "color > size").all()
    keep_size = keep_colour.assign(color=np.where(test["r1"] < 1.05, "red", "blue"), size=test["r1"])
    report = attribute_priority_report(keep_size, test, split.pair, split.levels)
    assert (report["priority"] == "size > color").all()


def test_video_similarity():
    videos = make_physics_videos("uniform", 3, n_frames=4, random_state=0).videos
    same = video_similarity(videos, videos)
    assert np.isinf(same["psnr"]).all() and (same["ssim"] == 1.0).all()
    noisy = np.clip(videos.astype(int) + np.random.default_rng(0).integers(-20, 20, videos.shape), 0, 255)
    scores = video_similarity(noisy.astype(np.uint8), videos)
    assert (scores["psnr"] < 30).all() and (scores["ssim"] < 1).all()
    with pytest.raises(ValueError, match="one shape"):
        video_similarity(videos[:2], videos)


# ------------------------------------------------------------------ issue 64
@pytest.mark.parametrize("n_cond_frames", [10, 8, 7, -1])
def test_velocity_error_refuses_conditioning_frames_that_leave_no_velocity(n_cond_frames):
    data = make_physics_videos("uniform", 3, n_frames=8, random_state=0)
    with pytest.raises(ValueError, match=rf"n_cond_frames={n_cond_frames}.*8 frames"):
        velocity_error(data.videos, data.params, "uniform", n_cond_frames=n_cond_frames, states_true=data.states)
    assert velocity_error(data.videos, data.params, "uniform", n_cond_frames=6,
                          states_true=data.states)["vel_error"].notna().all()


def test_parse_names_nan_frames():
    frames = np.full((1, 2, 8, 8, 3), 0.5)
    frames[0, 1, 3, 3, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        parse_object_states(frames)
    with pytest.raises(ValueError, match="infinite"):
        parse_object_states(np.where(np.isnan(frames), np.inf, frames))
