"""ViLAMP from pixels (issue 61): the harder needle videos, the KMeans baseline, prompt-ensemble questions."""

import hashlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.utils.estimator_checks import check_estimator

from skicml.datasets import make_needle_embeddings, make_needle_videos
from skicml.datasets._shapes import SHAPE_COLORS
from skicml.utils._test_common import CLIP_TEST_CONFIG
from skicml.video import (
    CLIPVideoEncoder,
    ClusterKeyframeCompressor,
    VideoEmbedding,
    ViLAMPCompressor,
    cluster_keyframes,
    merge_features,
    pack_videos,
)


# ---------------------------------------------------------------- make_needle_videos

def test_needle_videos_defaults_are_those_of_earlier_versions():
    # The hash of the videos, queries, targets and event frames before issue 61 added events,
    # distractors and decoys: the defaults draw the same random numbers in the same order.
    data = make_needle_videos(3, n_frames=(50, 120), random_state=0)
    digest = hashlib.sha256()
    for video in data.videos:
        digest.update(video.tobytes())
    digest.update(str((data.queries, data.target.tolist(), [n.tolist() for n in data.needle_frames])).encode())
    assert digest.hexdigest()[:16] == "d1dcd03fac50499d"


@settings(max_examples=25, deadline=None)
@given(n_scenes=st.integers(2, 6), data=st.data(), needle_len=st.integers(1, 5), span_cuts=st.booleans(),
       seed=st.integers(0, 2**16))
def test_events_decoys_and_distractors_are_where_they_are_said_to_be(n_scenes, data, needle_len, span_cuts, seed):
    n_events = data.draw(st.integers(1, n_scenes - 1 if span_cuts else n_scenes))
    n_decoys = data.draw(st.integers(0, n_events))
    n_distractors = data.draw(st.integers(0, n_scenes))
    shortest = n_scenes + (n_events + n_decoys) * needle_len - (0 if span_cuts else n_events)
    out = make_needle_videos(2, n_frames=(shortest, shortest + 30), image_size=16, needle_len=needle_len,
                             n_scenes=n_scenes, n_events=n_events, n_decoys=n_decoys, n_distractors=n_distractors,
                             span_cuts=span_cuts, n_classes=3, random_state=seed)
    for video, events, decoys, distractors, scenes, needles in zip(
            out.videos, out.events, out.decoy_frames, out.distractor_frames, out.scene_index, out.needle_frames):
        assert events.shape == (n_events, 2) and (np.diff(events, axis=1) == needle_len).all()
        assert (events[1:, 0] >= events[:-1, 1]).all() and events.min() >= 0 and events.max() <= len(video)
        assert len(scenes) == len(video) and (np.diff(scenes) >= 0).all() and set(scenes) == set(range(n_scenes))
        # Each event in its own scene, or across its own cut.
        spanned = [tuple(np.unique(scenes[a:b])) for a, b in events]
        assert len(set(spanned)) == n_events
        assert all(len(s) == (2 if span_cuts and needle_len > 1 else 1) for s in spanned)
        assert len(decoys) == n_decoys * needle_len and not set(decoys) & set(needles)
        # A decoy follows its event at once.
        assert all(any(d == b for _, b in events) for d in decoys[::needle_len])
        assert len(set(scenes[distractors])) == n_distractors if n_distractors else len(distractors) == 0


def _colour_pixels(frames, colour):
    rgb = np.array(SHAPE_COLORS[colour], dtype=float)
    return (np.abs(frames.astype(float) - rgb).max(-1) < 40).sum(axis=(-1, -2))


def test_decoys_repeat_the_event_object_in_another_shape_and_distractors_take_the_query_colour():
    data = make_needle_videos(4, n_frames=120, n_scenes=4, n_objects=1, n_events=2, n_decoys=2, n_distractors=1,
                              n_classes=3, noise=0.0, random_state=3)
    for video, events, decoys, distractors, colour in zip(data.videos, data.events, data.decoy_frames,
                                                          data.distractor_frames, data.query_colors):
        query_colour = _colour_pixels(video, colour)
        others = np.setdiff1d(np.arange(len(video)), distractors)
        events_frames = np.concatenate([np.arange(a, b) for a, b in events])
        quiet = np.setdiff1d(others, np.concatenate([events_frames, decoys]))
        assert (query_colour[quiet] == 0).all()  # only events, decoys and distractors have the query colour
        assert (query_colour[events_frames] > 0).all() and (query_colour[decoys] > 0).all()
        assert (query_colour[distractors] > 0).all()
        # The decoy is the event's object in place (its pixels overlap) but not its shape.
        for (a, b) in events:
            if b in set(decoys.tolist()):
                event_mask = np.abs(video[b - 1].astype(float) - SHAPE_COLORS[colour]).max(-1) < 40
                decoy_mask = np.abs(video[b].astype(float) - SHAPE_COLORS[colour]).max(-1) < 40
                if not set(distractors.tolist()) & {b - 1, b}:
                    assert (event_mask & decoy_mask).any() and not np.array_equal(event_mask, decoy_mask)


def test_frame_captions_name_the_objects_each_frame_shows():
    data = make_needle_videos(3, n_frames=80, n_scenes=4, n_objects=2, n_events=2, n_decoys=1, n_distractors=1,
                              n_classes=3, random_state=5)
    for video, captions, needles, decoys, distractors, colour, y in zip(
            data.videos, data.frame_captions, data.needle_frames, data.decoy_frames, data.distractor_frames,
            data.query_colors, data.target):
        assert len(captions) == len(video)
        shape = data.target_names[y]
        extra = np.zeros(len(video), dtype=int)
        for frames in (needles, decoys, distractors):
            extra[frames] += 1
        for t, caption in enumerate(captions):
            objects = caption.split(" and ")
            assert len(objects) == 2 + extra[t]  # the two drifting objects, then the query-colour ones
            assert all(o.startswith(("a small ", "a large ")) for o in objects)
            named = [o for o in objects if f" {colour} " in o]
            assert len(named) == extra[t]  # no drifting object has the query colour
        for t in needles:
            assert f"{colour} {shape}" in captions[t]
        for t in np.concatenate([decoys, distractors]):
            assert f"{colour} diamond" in captions[t]  # the distractor shape, SHAPE_NAMES[n_classes]


def test_needle_frame_stream_batches_frames_with_their_captions():
    pytest.importorskip("open_clip")
    from skicml.clip._model import import_open_clip
    from skicml.clip._pretrain import NeedleFrameStream

    tokenizer = import_open_clip().tokenizer.SimpleTokenizer(context_length=20)
    cfg = {"size": (32, 32), "mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25)}
    stream = NeedleFrameStream(12, 0, tokenizer, cfg, {"image_size": 32})
    images, tokens = stream.sample()
    assert images.shape == (12, 3, 32, 32) and tokens.shape == (12, 20)
    assert stream.state_dict() == {"index": 1}
    again, again_tokens = NeedleFrameStream(12, 0, tokenizer, cfg, {"image_size": 32}).sample()
    assert torch.equal(images, again) and torch.equal(tokens, again_tokens)  # batch i is fixed by (seed, i)
    other, _ = stream.sample()
    assert not torch.equal(images, other)


@pytest.mark.parametrize(("params", "message"), [
    (dict(n_events=2, n_decoys=3), "n_decoys=3 exceeds n_events=2"),
    (dict(n_scenes=2, n_events=3), "n_events=3 exceeds the 2 scenes"),
    (dict(n_scenes=3, n_events=3, span_cuts=True), "n_events=3 exceeds the 2 scene cuts"),
    (dict(n_distractors=4), "n_distractors=4 exceeds n_scenes=3"),
    (dict(n_classes=5, n_decoys=1), "no shape for distractors"),
    (dict(n_frames=12, n_scenes=3, n_events=3, n_decoys=1), "at least 16 frames"),
])
def test_needle_video_arguments_that_cannot_be_met_are_refused(params, message):
    with pytest.raises(ValueError, match=message):
        make_needle_videos(1, **{"n_frames": 100, **params})


# ---------------------------------------------------------------- the KMeans baseline

@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), d=st.integers(2, 6), k=st.integers(1, 10), clusters=st.integers(1, 12),
       seed=st.integers(0, 2**16))
def test_cluster_keyframes_take_the_most_relevant_frame_of_the_most_relevant_clusters(n, d, k, clusters, seed):
    g = np.random.default_rng(seed)
    frames, query = g.standard_normal((n, d)), g.standard_normal(d)
    chosen = cluster_keyframes(frames, query, k, clusters)
    assert len(chosen) == min(k, clusters, n) and (np.diff(chosen) > 0).all()
    units = frames / np.linalg.norm(frames, axis=1, keepdims=True)
    relevance = units @ query / np.linalg.norm(query)
    assert int(np.argmax(relevance)) in chosen.tolist()
    # Positive rescaling of frames and query changes nothing (cosines, KMeans on unit vectors).
    scaled = cluster_keyframes(frames * g.uniform(0.5, 3, (n, 1)), 2.5 * query, k, clusters)
    np.testing.assert_array_equal(scaled, chosen)
    # A cluster per frame is plain top-k by relevance.
    top = np.sort(np.argsort(-relevance, kind="stable")[:min(k, n)])
    np.testing.assert_array_equal(cluster_keyframes(frames, query, k, n_clusters=None if k >= n else n), top)


def test_cluster_keyframes_keep_one_frame_per_cluster():
    # Two tight groups and a loner: three clusters, one keyframe each, the most relevant of its group.
    frames = np.array([[1.0, 0.0], [1.0, 0.02], [1.0, 0.04], [0.0, 1.0], [0.02, 1.0], [-1.0, -0.2]])
    chosen = cluster_keyframes(frames, np.array([1.0, 0.5]), max_keyframes=5, n_clusters=3)
    assert chosen.tolist() == [2, 4, 5]


def test_cluster_compressor_is_the_vilamp_merge_on_cluster_keyframes():
    data = make_needle_embeddings(3, n_frames=60, n_patches=4, dim=8, random_state=0)
    videos = [VideoEmbedding(f, q, p) for f, q, p in zip(data.frames, data.queries, data.patches)]
    compressor = ClusterKeyframeCompressor(max_keyframes=5, n_clusters=12).fit(videos)
    tokens, types = compressor.transform_tokens(videos)
    for video, sequence, kind, chosen in zip(videos, tokens, types, compressor.get_selection(videos)):
        expected = cluster_keyframes(video.frames, video.query, 5, 12)
        np.testing.assert_array_equal(chosen, expected)
        want, want_types = merge_features(torch.from_numpy(video.patches), torch.from_numpy(video.query),
                                          torch.from_numpy(expected))
        torch.testing.assert_close(sequence, want)
        assert torch.equal(kind, want_types)
    assert compressor.transform(videos).shape == (3, 16)
    # Packed rows (what CLIPVideoEncoder hands on in a Pipeline) are read by their header, with no argument.
    X = pack_videos(videos)
    on_rows = ClusterKeyframeCompressor(max_keyframes=5, n_clusters=12).fit(X)
    assert on_rows.layout_ == "packed"
    np.testing.assert_allclose(on_rows.transform(X), compressor.transform(videos), atol=1e-6)
    mask = compressor.set_params(output="selection").transform(videos)
    assert (mask.sum(1) == 5).all()


def test_cluster_compressor_passes_check_estimator():
    check_estimator(ClusterKeyframeCompressor())


def test_cluster_compressor_refuses_bad_parameters():
    videos = [VideoEmbedding(np.ones((4, 3)), np.ones(3))]
    with pytest.raises(ValueError, match="n_clusters"):
        ClusterKeyframeCompressor(n_clusters=0).fit(videos)


# ---------------------------------------------------------------- questions as prompt ensembles, the natural pipeline

@pytest.fixture(scope="module")
def tiny_clip():
    pytest.importorskip("open_clip")
    from skicml.clip import CLIPEmbedder

    return CLIPEmbedder(pretrained=None, model_config=CLIP_TEST_CONFIG, random_state=0, device="cpu")


def test_a_prompt_ensemble_question_is_the_mean_of_its_captions(tiny_clip):
    frames = np.random.default_rng(0).integers(0, 256, (5, 32, 32, 3), dtype=np.uint8)
    prompts = ["a small red circle", "a large red square"]
    encoder = CLIPVideoEncoder(embedder=tiny_clip).fit([(frames, prompts)])
    video = encoder.transform_videos([(frames, prompts), (frames, "a small red circle")])
    captions = encoder.text_embedder_.transform(prompts)
    np.testing.assert_allclose(video[0].query, captions.mean(0), rtol=1e-6)
    np.testing.assert_allclose(video[1].query, captions[0], rtol=1e-6)
    for bad in ([], ["a red circle", ""], ["a red circle", 3]):
        with pytest.raises(ValueError, match=r"X\[0\]"):
            encoder.transform([(frames, bad)])


def test_the_natural_pipeline_finds_more_events_with_differential_selection_than_with_top_k():
    # The shipped tiny CLIP, the prompt ensembles, packed rows read with no layout argument.
    pytest.importorskip("open_clip")
    data = make_needle_videos(6, n_frames=120, n_scenes=5, n_objects=1, n_events=3, n_classes=3, random_state=0)
    pairs = list(zip(data.videos, data.query_prompts))
    X = CLIPVideoEncoder().fit(pairs).transform(pairs)
    recall = {}
    for name, compressor in (("dks", ViLAMPCompressor(max_keyframes=6, fill="gaps", output="selection")),
                             ("top", ViLAMPCompressor(max_keyframes=6, redundancy_threshold=1.0,
                                                      output="selection"))):
        mask = compressor.fit(X).transform(X)
        assert compressor.layout_ == "packed" and (mask.sum(1) == 6).all()
        recall[name] = np.mean([mask[i, a:b].any() for i, events in enumerate(data.events) for a, b in events])
    assert recall["dks"] > recall["top"] and recall["dks"] >= 0.6

