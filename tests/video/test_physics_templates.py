"""The combinatorial scenes (a small PHYRE) and the automatic abnormal-rollout checks."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.datasets import (
    HELD_OUT_TEMPLATES,
    PHYSICS_TEMPLATES,
    TEMPLATE_OBJECTS,
    make_template_scenes,
    make_template_split,
)
from skicml.datasets._physics_templates import _BAR, _TRAINING_ORDER, _simulate
from skicml.video import abnormal_rollouts


def _segment_distance(points, bar):
    start, end = bar[:2], bar[2:]
    along = end - start
    t = np.clip(((points - start) @ along) / (along @ along), 0, 1)
    return np.linalg.norm(points - start - t[..., None] * along, axis=-1)


def test_templates_are_every_triple_and_the_split_holds_out_new_combinations_of_seen_types():
    assert len(PHYSICS_TEMPLATES) == 20 and len(set(PHYSICS_TEMPLATES)) == 20
    assert sorted(_TRAINING_ORDER + HELD_OUT_TEMPLATES) == list(range(20))
    # The first two training templates already hold every type, so only combinations grow.
    assert set(PHYSICS_TEMPLATES[_TRAINING_ORDER[0]]) | set(PHYSICS_TEMPLATES[_TRAINING_ORDER[1]]) \
        == set(TEMPLATE_OBJECTS)
    split = make_template_split(3, n_train=7, n_eval_per_template=2, n_frames=3, resolution=8, random_state=0)
    assert split.train_templates == list(_TRAINING_ORDER[:3])
    assert set(split.train.params["template"]) == set(split.train_templates)
    assert len(split.train.videos) == 9  # 7 rounded up to 3 a template
    assert set(split.test_out.params["template"]) == set(HELD_OUT_TEMPLATES)
    assert not set(split.test_out.params["template"]) & set(split.train.params["template"])


@settings(max_examples=5, deadline=None)
@given(template=st.integers(0, 19), seed=st.integers(0, 2 ** 16))
def test_balls_never_sink_into_static_objects_or_each_other(template, seed):
    data = make_template_scenes([template], n_per_template=2, n_frames=12, resolution=16, random_state=seed)
    for i in range(2):
        for k in range(2):
            if not np.isfinite(data.radii[i, k]):
                assert "ball" not in PHYSICS_TEMPLATES[template] or k == 0
                continue
            centres, r = data.states[i, :, k], data.radii[i, k]
            assert np.all(centres[:, 1] >= r - 0.05)  # the ground
            for bar in data.bars[i][np.isfinite(data.bars[i][:, 0])]:
                assert np.all(_segment_distance(centres, bar) >= r + _BAR - 0.05)
            for peg in data.pegs[i][np.isfinite(data.pegs[i][:, 0])]:
                assert np.all(np.linalg.norm(centres - peg[:2], axis=-1) >= r + peg[2] - 0.05)
        if np.isfinite(data.radii[i, 1]):
            gap = np.linalg.norm(data.states[i, :, 0] - data.states[i, :, 1], axis=-1) - data.radii[i].sum()
            assert gap.min() >= -0.05
    assert ("ball" in PHYSICS_TEMPLATES[template]) == bool(np.isfinite(data.radii[:, 1]).all())


def test_scenes_are_reproducible_and_drawn_as_documented():
    a = make_template_scenes([0, 19], n_per_template=2, n_frames=5, resolution=32, random_state=3)
    b = make_template_scenes([0, 19], n_per_template=2, n_frames=5, resolution=32, random_state=3)
    assert np.array_equal(a.videos, b.videos) and a.videos.dtype == np.uint8
    assert a.params["objects"].tolist() == ["floor+ramp+wall"] * 2 + ["ball+pegs+cup"] * 2
    frame = a.videos[0, 0].reshape(-1, 3)
    assert (frame == 255).all(-1).mean() > 0.7  # white background
    assert (frame < 20).all(-1).any()  # black static objects
    # The red ball's centre pixel is red.
    x, y = a.states[0, 0, 0]
    column, row = int(x / 10 * 32), int((10 - y) / 10 * 32)
    assert a.videos[0, 0, row, column, 0] > 200 and a.videos[0, 0, row, column, 1] < 60
    # Everything starts at rest and falls: gravity moves the red ball.
    assert np.all(a.states[:, 1, 0, 1] < a.states[:, 0, 0, 1])


def test_an_elastic_frictionless_bounce_keeps_its_energy_and_no_gravity_keeps_balls_still():
    bars = np.full((1, 5, 4), np.nan)
    pegs = np.full((1, 2, 3), np.nan)
    balls = np.array([[[5.0, 4.0, 0.5], [-100.0, -100.0, 1.0]]])
    present = np.array([[True, False]])
    states = _simulate(bars, pegs, balls, present, 24, 0.1, 40, 10.0, 1.0, 0.0)
    heights = states[0, :, 0, 1]
    assert heights.min() < 1.0 and np.isclose(heights[1:].max(), 4.0, atol=0.1)  # back up to where it started
    assert np.allclose(states[0, :, 0, 0], 5.0)
    still = _simulate(bars, pegs, balls, present, 5, 0.1, 10, 0.0, 0.5, 0.2)
    assert np.allclose(still[0, :, 0], [5.0, 4.0])


def test_a_ball_slides_down_a_frictionless_ramp_at_g_sin_theta():
    angle = np.radians(30)
    start, end = np.array([1.0, 6.0]), np.array([1.0 + 6 * np.cos(angle), 6.0 - 6 * np.sin(angle)])
    bars = np.full((1, 5, 4), np.nan)
    bars[0, 0] = [*start, *end]
    normal = np.array([np.sin(angle), np.cos(angle)])
    centre = start + 0.3 * (end - start) + (0.5 + _BAR) * normal
    balls = np.array([[[*centre, 0.5], [-100.0, -100.0, 1.0]]])
    states = _simulate(bars, np.full((1, 2, 3), np.nan), balls, np.array([[True, False]]), 6, 0.1, 100, 10.0,
                       0.0, 0.0)
    travelled = (states[0, -1, 0] - centre) @ (end - start) / 6
    expected = 0.5 * 10.0 * np.sin(angle) * 0.5 ** 2
    assert travelled == pytest.approx(expected, rel=0.05)


def test_abnormal_rollouts_pass_the_simulation_and_catch_each_kind_of_failure():
    scenes = make_template_scenes([0, 4, 19], n_per_template=4, n_frames=10, random_state=0)
    clean = abnormal_rollouts(scenes.videos, scenes)
    assert not clean["abnormal"].any() and clean["drift"].max() < 0.5
    videos = scenes.videos
    red = (videos[..., 0] > 127) & (videos[..., 1] < 127) & (videos[..., 2] < 127)
    gone = videos.copy()
    gone[:, 3:][red[:, 3:]] = 255
    assert abnormal_rollouts(gone, scenes)["vanished"].all()
    frozen = np.repeat(videos[:, :1], videos.shape[1], axis=1)
    report = abnormal_rollouts(frozen, scenes)
    moved = np.linalg.norm(scenes.states[:, -1, 0] - scenes.states[:, 0, 0], axis=-1) > 1.5
    in_view = np.all((scenes.states[:, -1, 0] > 1) & (scenes.states[:, -1, 0] < 9), axis=-1)
    assert report["abnormal"][moved & in_view].all()
    blank = videos.copy()
    blank[(videos < 128).all(-1)] = 255  # static objects fade away
    assert (abnormal_rollouts(blank, scenes)["static_change"] > 0.9).all()


def test_abnormal_rollouts_refuses_bad_arguments():
    scenes = make_template_scenes([0], n_per_template=1, n_frames=4, resolution=16, random_state=0)
    with pytest.raises(ValueError, match="pred must have the scenes' video shape"):
        abnormal_rollouts(scenes.videos[:, :3], scenes)
    with pytest.raises(ValueError, match="n_cond_frames"):
        abnormal_rollouts(scenes.videos, scenes, n_cond_frames=4)
    with pytest.raises(ValueError, match="drift_limit"):
        abnormal_rollouts(scenes.videos, scenes, drift_limit=0)
    with pytest.raises(ValueError, match="make_template_scenes Bunch"):
        abnormal_rollouts(scenes.videos, {"states": scenes.states})
    with pytest.raises(ValueError, match="templates must be template numbers"):
        make_template_scenes([20])
    with pytest.raises(ValueError, match="n_train_templates"):
        make_template_split(16)


def test_every_template_lays_out():
    for template, _ in itertools.product(range(len(PHYSICS_TEMPLATES)), range(1)):
        data = make_template_scenes([template], n_per_template=3, n_frames=2, resolution=8, random_state=template)
        assert len(data.videos) == 3
