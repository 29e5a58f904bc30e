"""ViLAMP's estimators: the compressor, the classifier and the CLIP video encoder."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from skicml.datasets import make_needle_embeddings
from skicml.utils._test_common import CLIP_TEST_CONFIG
from skicml.video import (
    CLIPVideoEncoder,
    VideoEmbedding,
    ViLAMPClassifier,
    ViLAMPCompressor,
    merge_features,
    pack_videos,
    select_keyframes,
    unpack_videos,
)
from skicml.video._vilamp._layout import HEADER_WIDTH, read_layout


def _videos(n=12, n_frames=80, n_patches=4, dim=8, seed=0, **kwargs):
    data = make_needle_embeddings(n, n_frames=n_frames, n_patches=n_patches, dim=dim, random_state=seed, **kwargs)
    videos = [VideoEmbedding(f, q, p) for f, q, p in zip(data.frames, data.queries, data.patches)]
    return videos, data


def test_packing_round_trips_videos_of_different_lengths():
    videos, _ = _videos(n=3, n_frames=(10, 30))
    X = pack_videos(videos)
    longest = max(v.n_frames for v in videos)
    # The rows carry their layout: no argument is needed to read them back.
    for back in (unpack_videos(X), unpack_videos(X, dim=8, n_frames=longest, n_patches=4)):
        for a, b in zip(videos, back):
            np.testing.assert_array_equal(a.frames, b.frames)
            np.testing.assert_array_equal(a.patches, b.patches)
            np.testing.assert_array_equal(a.query, b.query)
    assert read_layout(X) == (8, longest, 4)
    with pytest.raises(ValueError, match="more than n_frames"):
        pack_videos(videos, n_frames=5)
    with pytest.raises(ValueError, match="columns"):
        unpack_videos(X[:, :-1])
    with pytest.raises(ValueError, match=r"header says dim=8.*dim=7"):
        unpack_videos(X, dim=7)


def test_rows_without_a_header_are_read_with_the_layout_given():
    videos, _ = _videos(n=3, n_frames=(10, 30))
    X = pack_videos(videos)
    bare = X[:, HEADER_WIDTH:]  # the rows as hand-made code might write them
    assert read_layout(bare) is None
    longest = max(v.n_frames for v in videos)
    for a, b in zip(videos, unpack_videos(bare, dim=8, n_frames=longest, n_patches=4)):
        np.testing.assert_array_equal(a.patches, b.patches)
    with pytest.raises(ValueError, match=r"no layout header.*pass dim, n_frames and n_patches"):
        unpack_videos(bare)
    on_bare = ViLAMPCompressor(max_keyframes=3, dim=8, n_patches=4).fit(bare)
    on_rows = ViLAMPCompressor(max_keyframes=3).fit(X)
    np.testing.assert_allclose(on_bare.transform(bare), on_rows.transform(X))


def test_a_broken_layout_header_is_refused_not_read_as_single_frames():
    videos, _ = _videos(n=2, n_frames=10)
    X = pack_videos(videos)
    for column, value in ((1, 8.5), (2, 0), (3, -1), (2, 11)):
        broken = X.copy()
        broken[:, column] = value
        with pytest.raises(ValueError, match=r"(?s)layout header.*pass dim, n_frames and n_patches"):
            ViLAMPCompressor().fit(broken)
    mixed = X.copy()
    mixed[1, 1] = 4
    with pytest.raises(ValueError, match="layout header"):
        ViLAMPCompressor().fit(mixed)
    with pytest.raises(ValueError, match=r"header says n_patches=4.*n_patches=3"):
        ViLAMPCompressor(n_patches=3).fit(X)


def test_compressor_packed_rows_equal_the_list_of_videos():
    videos, _ = _videos(n=4, n_frames=(40, 90))
    X = pack_videos(videos)
    for output in ("pooled", "tokens", "selection"):
        on_list = ViLAMPCompressor(max_keyframes=6, output=output).fit(videos)
        on_rows = ViLAMPCompressor(max_keyframes=6, output=output, dim=8, n_patches=4).fit(X)
        assert on_rows.n_frames_ == max(v.n_frames for v in videos)
        np.testing.assert_allclose(on_rows.transform(X), on_list.transform(videos), atol=1e-6)
        assert on_rows.transform(X).shape[1] == len(on_rows.get_feature_names_out())


def test_compressor_outputs_match_the_functions():
    videos, _ = _videos(n=2, n_frames=50)
    compressor = ViLAMPCompressor(max_keyframes=5, redundancy_threshold=0.9, reference="nearest").fit(videos)
    tokens, types = compressor.transform_tokens(videos)
    for video, sequence, kind, chosen in zip(videos, tokens, types, compressor.get_selection(videos)):
        expected_keys = select_keyframes(torch.from_numpy(video.frames), torch.from_numpy(video.query), 5, 0.9)
        assert chosen.tolist() == expected_keys.tolist()
        expected, expected_types = merge_features(torch.from_numpy(video.patches), torch.from_numpy(video.query),
                                                  expected_keys, reference="nearest")
        torch.testing.assert_close(sequence, expected)
        assert torch.equal(kind, expected_types)
    assert compressor.n_tokens_max_ == 5 * 4 + 50 - 5


def test_uniform_selector_is_evenly_spaced():
    videos, _ = _videos(n=1, n_frames=100)
    chosen = ViLAMPCompressor(max_keyframes=5, selector="uniform").fit(videos).get_selection(videos)[0]
    assert chosen.tolist() == [0, 25, 50, 74, 99]


def test_compressor_finds_the_needle():
    videos, data = _videos(n=10, n_frames=400, n_patches=4, dim=16)
    compressor = ViLAMPCompressor(max_keyframes=8).fit(videos)
    hits = [bool(set(chosen) & set(needle)) for chosen, needle in
            zip(compressor.get_selection(videos), data.needle_frames)]
    uniform = ViLAMPCompressor(max_keyframes=8, selector="uniform").fit(videos)
    uniform_hits = [bool(set(chosen) & set(needle)) for chosen, needle in
                    zip(uniform.get_selection(videos), data.needle_frames)]
    assert np.mean(hits) == 1.0 and np.mean(uniform_hits) < 0.5


def test_compressor_in_a_grid_search_pipeline():
    videos, data = _videos(n=24, n_frames=60, dim=8)
    X = pack_videos(videos)
    pipeline = make_pipeline(ViLAMPCompressor(dim=8, n_patches=4), LogisticRegression(max_iter=500))
    search = GridSearchCV(pipeline, {"vilampcompressor__max_keyframes": [2, 4],
                                     "vilampcompressor__redundancy_threshold": [0.5, 0.9]}, cv=2)
    search.fit(X, data.target)
    assert set(search.best_params_) == {"vilampcompressor__max_keyframes",
                                        "vilampcompressor__redundancy_threshold"}
    restored = pickle.loads(pickle.dumps(search.best_estimator_))
    np.testing.assert_array_equal(restored.predict(X), search.best_estimator_.predict(X))


@pytest.mark.parametrize(("params", "X_kind", "message"), [
    (dict(dim=8), "rows", "needs n_frames or n_patches"),
    (dict(n_frames=3), "rows", "needs dim"),
    (dict(dim=7, n_patches=4), "rows", "no packed layout"),
    (dict(keyframe_pool=2), "videos3", "square patch grid"),
])
def test_compressor_layout_errors(params, X_kind, message):
    videos, _ = _videos(n=2, n_frames=10, n_patches=3 if X_kind == "videos3" else 4)
    X = pack_videos(videos)[:, HEADER_WIDTH:] if X_kind == "rows" else videos
    with pytest.raises(ValueError, match=message):
        ViLAMPCompressor(**params).fit(X)


def test_bad_videos_get_clear_errors():
    videos, _ = _videos(n=2, n_frames=10)
    bad = VideoEmbedding(videos[0].frames, videos[0].query[:-1], videos[0].patches)
    with pytest.raises(ValueError, match="query has shape"):
        ViLAMPCompressor().fit([bad])
    nan = VideoEmbedding(videos[0].frames.copy(), videos[0].query, videos[0].patches)
    nan.frames[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ViLAMPCompressor().fit([nan])
    with pytest.raises(ValueError, match="no frames"):
        ViLAMPCompressor().fit([VideoEmbedding(np.zeros((0, 8)), np.ones(8))])
    fitted = ViLAMPCompressor().fit(videos)
    other, _ = _videos(n=1, n_frames=10, dim=10)
    with pytest.raises(ValueError, match="do not match the layout"):
        fitted.transform(other)
    X = pack_videos(videos)
    X[0, HEADER_WIDTH] = 11
    with pytest.raises(ValueError, match="outside"):
        ViLAMPCompressor(dim=8, n_patches=4).fit(X)
    with pytest.raises(ValueError, match="outside"):
        ViLAMPCompressor().fit(X)


def test_classifier_learns_the_needle_class_and_round_trips():
    videos, data = _videos(n=130, n_frames=60, n_patches=4, dim=16, n_classes=2, seed=1)
    model = ViLAMPClassifier(max_keyframes=6, d_model=16, n_heads=2, max_epochs=30, random_state=0, device="cpu")
    model.fit(videos[:100], data.target[:100])
    assert model.score(videos[100:], data.target[100:]) >= 0.9
    assert len(model.history_["train_loss"]) == 30
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_allclose(restored.predict_proba(videos[100:]), model.predict_proba(videos[100:]), atol=1e-6)
    # Same seed, same model.
    again = clone(model).fit(videos[:100], data.target[:100])
    np.testing.assert_allclose(again.predict_proba(videos[100:]), model.predict_proba(videos[100:]), atol=1e-6)


def test_learnable_merge_gets_gradients_through_the_classifier():
    videos, data = _videos(n=8, n_frames=30, n_patches=4, dim=8, n_classes=2)
    model = ViLAMPClassifier(max_keyframes=3, learnable_merge=True, head="transformer", d_model=8, n_layers=1,
                             n_heads=2, max_epochs=1, random_state=0, device="cpu").fit(videos, data.target)
    merger = model.module_.merger
    assert merger.learnable
    before = merger.log_temperature.detach().clone()
    model2 = ViLAMPClassifier(max_keyframes=3, learnable_merge=True, head="transformer", d_model=8, n_layers=1,
                              n_heads=2, max_epochs=3, random_state=0, device="cpu").fit(videos, data.target)
    assert not torch.equal(model2.module_.merger.log_temperature.detach(), before)
    assert not torch.equal(model2.module_.merger.query_map.weight, merger.query_map.weight)


@pytest.fixture(scope="module")
def tiny_clip():
    pytest.importorskip("open_clip")
    from skicml.clip import CLIPEmbedder

    return CLIPEmbedder(pretrained=None, model_config=CLIP_TEST_CONFIG, random_state=0, device="cpu")


def test_clip_video_encoder_feeds_the_compressor(tiny_clip):
    rng = np.random.default_rng(0)
    clips = [(rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), q)
             for n, q in ((7, "a red circle"), (12, "a blue square"))]
    encoder = CLIPVideoEncoder(embedder=tiny_clip).fit(clips)
    assert (encoder.dim_, encoder.n_frames_, encoder.n_patches_) == (8, 12, 16)
    videos = encoder.transform_videos(clips)
    assert videos[0].frames.shape == (7, 8) and videos[0].patches.shape == (7, 16, 8)
    # The frame embedding is what CLIPEmbedder gives the frames.
    np.testing.assert_allclose(videos[1].frames, encoder.image_embedder_.transform(clips[1][0]), atol=1e-5)
    pipeline = make_pipeline(encoder, ViLAMPCompressor(max_keyframes=3, dim=8, n_frames=12, n_patches=16))
    assert pipeline.fit_transform(clips).shape == (2, 16)
    assert read_layout(encoder.transform(clips)) == (8, 12, 16)
    capped = CLIPVideoEncoder(embedder=tiny_clip, max_frames=5).fit(clips)
    assert capped.n_frames_ == 5
    with pytest.raises(ValueError, match="empty question"):
        encoder.transform([(clips[0][0], " ")])
    with pytest.raises(ValueError, match="n_frames, height, width, 3"):
        encoder.transform([(np.zeros((3, 8)), "a red circle")])


def test_a_pipeline_of_the_encoder_and_the_compressor_reads_the_packed_layout(tiny_clip):
    # Issue 64: without dim, n_frames and n_patches the compressor read each packed row as a video of
    # one frame and selected frame 0 of every video, silently.
    rng = np.random.default_rng(1)
    clips = [(rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), q)
             for n, q in ((9, "a red circle"), (14, "a blue square"), (11, "a green star"))]
    for output in ("selection", "pooled", "tokens"):
        pipeline = make_pipeline(CLIPVideoEncoder(embedder=tiny_clip),
                                 ViLAMPCompressor(max_keyframes=4, redundancy_threshold=1.0, output=output))
        out = pipeline.fit_transform(clips)
        compressor = pipeline[-1]
        assert (compressor.layout_, compressor.dim_, compressor.n_frames_, compressor.n_patches_) == \
            ("packed", 8, 14, 16)
        videos = pipeline[0].transform_videos(clips)
        alone = ViLAMPCompressor(max_keyframes=4, redundancy_threshold=1.0, output=output,
                                 max_tokens=compressor.n_tokens_max_).fit(videos)
        np.testing.assert_allclose(out, alone.transform(videos), atol=1e-6)
        np.testing.assert_allclose(pipeline.transform(clips), out)
    assert (out.shape[1] // 8) == compressor.n_tokens_max_
    selection = make_pipeline(CLIPVideoEncoder(embedder=tiny_clip), ViLAMPCompressor(
        max_keyframes=4, redundancy_threshold=1.0, output="selection")).fit_transform(clips)
    assert selection.shape == (3, 14) and (selection.sum(1) == 4).all()


def test_the_encoder_reads_pairs_given_as_lists_and_refuses_one_pair_or_none(tiny_clip):
    # Issue 64: [frames, question] lists were refused, one pair (not in a list) and [] reached numpy.
    rng = np.random.default_rng(2)
    frames = rng.integers(0, 256, (5, 32, 32, 3), dtype=np.uint8)
    encoder = CLIPVideoEncoder(embedder=tiny_clip).fit([(frames, "a red circle")])
    np.testing.assert_array_equal(encoder.transform([[frames, "a red circle"]]),
                                  encoder.transform([(frames, "a red circle")]))
    assert CLIPVideoEncoder(embedder=tiny_clip).fit([[frames, "a red circle"]]).n_frames_ == 5
    for one_pair in ((frames, "a red circle"), [frames, "a red circle"]):
        with pytest.raises(ValueError, match=r"one \(frames, question\) pair.*\[\(frames, question\)\]"):
            CLIPVideoEncoder(embedder=tiny_clip).fit(one_pair)
        with pytest.raises(ValueError, match=r"one \(frames, question\) pair"):
            encoder.transform(one_pair)
    for empty in ([], ()):
        with pytest.raises(ValueError, match="no videos"):
            CLIPVideoEncoder(embedder=tiny_clip).fit(empty)
        with pytest.raises(ValueError, match="no videos"):
            encoder.transform(empty)
    with pytest.raises(ValueError, match=r"X\[1\] must be a \(frames, question\) pair"):
        encoder.transform([(frames, "a red circle"), (frames,)])
    with pytest.raises(ValueError, match=r"X\[0\] must be a \(frames, question\) pair.*question a string"):
        encoder.transform([(frames, 3)])


def test_empty_input_and_records_that_are_not_videoembedding_get_clear_errors():
    # Issue 64: [] gave scikit-learn's 1-D error; tuples and dicts reached numpy.
    videos, _ = _videos(n=2, n_frames=10)
    fitted = ViLAMPCompressor().fit(videos)
    for estimator in (ViLAMPCompressor(), ViLAMPClassifier(max_epochs=1)):
        for empty in ([], ()):
            with pytest.raises(ValueError, match="no videos"):
                estimator.fit(empty, [])
    with pytest.raises(ValueError, match="no videos"):
        fitted.transform([])
    v = videos[0]
    for record, kind in (((v.frames, v.query), "tuple"), ((v.frames, v.query, v.patches), "tuple"),
                         ([v.frames, v.query], "list"),
                         ({"frames": v.frames, "query": v.query, "patches": v.patches}, "dict")):
        for X in ([record], [record, record]):
            with pytest.raises(TypeError, match=rf"X\[0\] is a {kind}.*VideoEmbedding\(frames, query, patches\)"):
                ViLAMPCompressor().fit(X)
            with pytest.raises(TypeError, match=rf"X\[0\] is a {kind}.*VideoEmbedding"):
                fitted.transform(X)
    with pytest.raises(TypeError, match=r"X\[1\] is a tuple.*VideoEmbedding"):
        ViLAMPCompressor().fit([v, (v.frames, v.query)])


@pytest.mark.parametrize("fraction", [0.99, 0.01])
def test_a_validation_fraction_that_leaves_a_split_without_a_class_names_itself(fraction):
    # Issue 64: validation_fraction=0.99 was reported as scikit-learn's test_size.
    videos, data = _videos(n=16, n_frames=20, n_patches=4, dim=8, n_classes=2)
    with pytest.raises(ValueError, match=rf"validation_fraction={fraction}.*16 videos"):
        ViLAMPClassifier(max_epochs=1, validation_fraction=fraction, random_state=0).fit(videos, data.target)
    ViLAMPClassifier(max_epochs=1, validation_fraction=0.25, random_state=0).fit(videos, data.target)
