"""ViLAMP's functional core: keyframe selection and feature merging."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from skicml.video import keyframe_references, merge_features, select_keyframes

finite = st.floats(-3, 3, allow_nan=False, width=32)


@st.composite
def videos(draw, max_frames=40, max_dim=6):
    n = draw(st.integers(1, max_frames))
    d = draw(st.integers(1, max_dim))
    frames = draw(arrays(np.float32, (n, d), elements=finite))
    query = draw(arrays(np.float32, (d,), elements=finite))
    return torch.from_numpy(frames), torch.from_numpy(query)


@st.composite
def gaussian_videos(draw):
    """Continuous random embeddings: exact ties have probability zero."""
    n, d, seed = draw(st.integers(1, 60)), draw(st.integers(2, 8)), draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64), torch.randn(d, generator=g, dtype=torch.float64)


def _cos(a, b):
    return F.normalize(a, dim=-1, eps=1e-12) @ F.normalize(b, dim=-1, eps=1e-12).T


@settings(max_examples=60, deadline=None)
@given(video=gaussian_videos(), k=st.integers(1, 12), tau=st.floats(-1, 1.2))
def test_selection_is_greedy_and_below_the_threshold(video, k, tau):
    frames, query = video
    chosen = select_keyframes(frames, query, max_keyframes=k, redundancy_threshold=tau)
    n = len(frames)
    assert 1 <= len(chosen) <= min(k, n)
    assert torch.equal(chosen, torch.unique(chosen)) and chosen.min() >= 0 and chosen.max() < n
    relevance = _cos(frames, query[None]).flatten()
    order = sorted(range(n), key=lambda i: (-float(relevance[i]), i))
    # The first keyframe is the most relevant frame, ties to the earlier one.
    assert order[0] in chosen.tolist()
    sims = _cos(frames[chosen], frames[chosen])
    off_diagonal = ~torch.eye(len(chosen), dtype=torch.bool)
    assert (sims[off_diagonal] <= tau + 1e-5).all()
    # Maximality: a frame more relevant than the last keyframe taken was
    # left out only because it is too similar to a keyframe taken before it.
    taken = set(chosen.tolist())
    last = max(order.index(i) for i in taken)
    for position, frame in enumerate(order[:last]):
        if frame not in taken:
            earlier = [i for i in order[:position] if i in taken]
            assert earlier and float(_cos(frames[frame:frame + 1], frames[earlier]).max()) > tau - 1e-5


@settings(max_examples=40, deadline=None)
@given(video=gaussian_videos(), k=st.integers(1, 12))
def test_no_threshold_is_top_k_by_relevance(video, k):
    frames, query = video
    chosen = select_keyframes(frames, query, max_keyframes=k, redundancy_threshold=1.0 + 1e-6)
    relevance = _cos(frames, query[None]).flatten()
    order = sorted(range(len(frames)), key=lambda i: (-float(relevance[i]), i))
    assert chosen.tolist() == sorted(order[:k])


@settings(max_examples=40, deadline=None)
@given(video=gaussian_videos(), k=st.integers(1, 12), tau=st.floats(0.0, 0.95), seed=st.integers(0, 2**16))
def test_selection_ignores_the_scale_of_embeddings(video, k, tau, seed):
    frames, query = video
    scales = torch.rand(len(frames) + 1, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    scales = 0.1 + 10 * scales
    a = select_keyframes(frames, query, max_keyframes=k, redundancy_threshold=tau)
    b = select_keyframes(frames * scales[:-1, None], query * scales[-1], max_keyframes=k, redundancy_threshold=tau)
    assert torch.equal(a, b)


@settings(max_examples=40, deadline=None)
@given(video=gaussian_videos(), k=st.integers(1, 8), tau=st.floats(0.0, 0.95), seed=st.integers(0, 2**16))
def test_permuting_frames_that_are_not_chosen_changes_nothing(video, k, tau, seed):
    frames, query = video
    chosen = select_keyframes(frames, query, max_keyframes=k, redundancy_threshold=tau)
    others = torch.tensor([i for i in range(len(frames)) if i not in set(chosen.tolist())], dtype=torch.long)
    permuted = frames.clone()
    shuffled = others[torch.randperm(len(others), generator=torch.Generator().manual_seed(seed))]
    permuted[others] = frames[shuffled]
    assert torch.equal(select_keyframes(permuted, query, max_keyframes=k, redundancy_threshold=tau), chosen)


def test_duplicated_frames_are_never_both_chosen():
    frames = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert select_keyframes(frames, torch.tensor([1.0, 0.1]), max_keyframes=3).tolist() == [0, 2]


@pytest.mark.parametrize(("n", "greedy", "k", "expected"), [
    # The official distribute_frames, run on these cases (spec section 6).
    (10, [2, 7], 5, [2, 5, 7, 8, 9]),
    (10, [2, 7], 4, [2, 5, 7, 9]),
    (12, [0], 4, [0, 4, 7, 10]),
])
def test_gap_fill_matches_the_official_cases(n, greedy, k, expected):
    # Frames in ``greedy`` are orthogonal directions relevant to the query;
    # the rest duplicate frame ``greedy[0]``'s opposite, so they are never taken.
    dim = n + 1
    frames = torch.zeros(n, dim)
    frames[:, -1] = -1.0
    frames[:, :n] += torch.eye(n) * 1e-3
    for i, frame in enumerate(greedy):
        frames[frame] = 0
        frames[frame, i] = 1.0
        frames[frame, -2] = 1.0
    query = torch.zeros(dim)
    query[-2] = 1.0
    assert select_keyframes(frames, query, max_keyframes=len(greedy), min_relevance=0.5).tolist() == greedy
    out = select_keyframes(frames, query, max_keyframes=k, min_relevance=0.5, fill="gaps")
    assert out.tolist() == expected


def test_nothing_relevant_falls_back_to_evenly_spaced_frames():
    frames = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
    assert select_keyframes(frames, torch.ones(4), max_keyframes=3, min_relevance=2.0).tolist() == [0, 4, 9]
    out = select_keyframes(frames, torch.ones(4), max_keyframes=3, min_relevance=2.0, fill="gaps")
    assert out.tolist() == [3, 6, 9]  # the official fill over one gap


@settings(max_examples=30, deadline=None)
@given(video=videos(), k=st.integers(1, 50))
def test_gap_fill_gives_exactly_the_budget(video, k):
    frames, query = video
    out = select_keyframes(frames, query, max_keyframes=k, fill="gaps")
    assert len(out) == min(k, len(frames)) and len(torch.unique(out)) == len(out)


def test_a_batch_of_videos_is_each_video_alone():
    g = torch.Generator().manual_seed(1)
    batch = [torch.randn(n, 5, generator=g) for n in (3, 40, 17)]
    queries = torch.randn(3, 5, generator=g)
    together = select_keyframes(batch, queries, max_keyframes=6, redundancy_threshold=0.3)
    for video, query, chosen in zip(batch, queries, together):
        assert torch.equal(select_keyframes(video, query, max_keyframes=6, redundancy_threshold=0.3), chosen)


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(frames=torch.zeros(0, 3)), "no frames"),
    (dict(query=torch.zeros(4)), "width 4"),
    (dict(frames=torch.tensor([[float("nan"), 0.0, 1.0]])), "NaN"),
    (dict(max_keyframes=0), "positive integer"),
    (dict(redundancy_threshold=-2), "at least -1"),
    (dict(fill="spread"), "fill"),
    (dict(frames=[]), "empty list"),
])
def test_selection_errors(kwargs, message):
    args = dict(frames=torch.ones(5, 3), query=torch.ones(3))
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        select_keyframes(**args)


# --------------------------------------------------------------------------
# merging
# --------------------------------------------------------------------------
def test_merge_matches_the_spec_reference_values():
    patches = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.6, 0.8]]])
    for temperature, weights, token in ((1.0, (0.549834, 0.450166), (0.819934, 0.360133)),
                                        (0.1, (0.880797, 0.119203), (0.952319, 0.095362))):
        tokens, types, w = merge_features(patches, torch.tensor([1.0, 0.0]), [0], temperature=temperature,
                                          return_weights=True)
        torch.testing.assert_close(w[1], torch.tensor(weights), atol=1e-6, rtol=0)
        torch.testing.assert_close(tokens[2], torch.tensor(token), atol=1e-6, rtol=0)
        assert types.tolist() == [1, 1, 0] and torch.isnan(w[0]).all()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), m=st.integers(1, 5), d=st.integers(1, 4), seed=st.integers(0, 2**16),
       pool_keys=st.lists(st.integers(0, 11), min_size=1, max_size=6, unique=True),
       reference=st.sampled_from(["preceding", "nearest", "official"]))
def test_merged_sequence_layout(n, m, d, seed, pool_keys, reference):
    keys = sorted({k % n for k in pool_keys})
    g = torch.Generator().manual_seed(seed)
    patches = torch.randn(n, m, d, generator=g)
    tokens, types = merge_features(patches, torch.randn(d, generator=g), keys, reference=reference)
    assert len(tokens) == len(keys) * m + n - len(keys)
    # Temporal order: walking the types reproduces which frames are keyframes.
    frame, position, seen = 0, 0, []
    while position < len(types):
        is_key = bool(types[position])
        seen.append(is_key)
        if is_key:
            torch.testing.assert_close(tokens[position:position + m], patches[frame])
            position += m
        else:
            token = tokens[position]
            assert (token >= patches[frame].min(0).values - 1e-5).all()
            assert (token <= patches[frame].max(0).values + 1e-5).all()
            position += 1
        frame += 1
    assert [i for i, key in enumerate(seen) if key] == keys


def test_a_frame_equal_to_its_reference_merges_by_relevance_alone():
    g = torch.Generator().manual_seed(3)
    patches = torch.randn(4, 6, 5, generator=g)
    patches[2] = patches[1] * 2.5  # frame 2 repeats keyframe 1, up to scale
    query = torch.randn(5, generator=g)
    with_redundancy = merge_features(patches, query, [1], merge_lambda=1.0, temperature=0.2)[0]
    relevance_only = merge_features(patches, query, [1], merge_lambda=0.0, temperature=0.2)[0]
    position = 1 + 6  # frame 0's token, then keyframe 1's six patches
    torch.testing.assert_close(with_redundancy[position], relevance_only[position])
    assert not torch.allclose(with_redundancy[0], relevance_only[0])


def test_a_large_temperature_is_mean_pooling():
    patches = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(0))
    tokens, _ = merge_features(patches, torch.ones(2), [0], temperature=1e8)
    torch.testing.assert_close(tokens[4:], patches[1:].mean(1))


def test_keyframe_pooling_is_bilinear_on_the_grid():
    patches = torch.arange(2 * 16 * 1, dtype=torch.float32).reshape(2, 16, 1)
    tokens, types = merge_features(patches, torch.ones(1), [0], keyframe_pool=2)
    assert types.tolist() == [1, 1, 1, 1, 0]
    grid = patches[0, :, 0].reshape(1, 1, 4, 4)
    expected = F.interpolate(grid, size=(2, 2), mode="bilinear", align_corners=False).flatten()
    torch.testing.assert_close(tokens[:4, 0], expected)
    with pytest.raises(ValueError, match="square grid"):
        merge_features(torch.ones(2, 6, 1), torch.ones(1), [0], keyframe_pool=2)


def test_references():
    assert keyframe_references([0], 3).tolist() == [0, 0, 0]
    assert keyframe_references([1, 5, 6], 8, "nearest").tolist() == [1, 1, 1, 1, 5, 5, 6, 6]
    assert keyframe_references([3, 5], 7, "official").tolist() == [-1, -1, -1, 0, 0, 1, 1]


@pytest.mark.parametrize(("keyframes", "message"), [
    ([], "empty"),
    ([0, 0], "repeated"),
    ([5], "outside"),
    ([0, 1, 2, 3, 4, 5], "only 3 frames"),
    ([0.5], "frame indices"),
])
def test_merge_rejects_bad_keyframes(keyframes, message):
    with pytest.raises(ValueError, match=message):
        merge_features(torch.ones(3, 2, 4), torch.ones(4), keyframes)


def test_merge_errors():
    with pytest.raises(ValueError, match="temperature"):
        merge_features(torch.ones(3, 2, 4), torch.ones(4), [0], temperature=0)
    with pytest.raises(ValueError, match="width 3"):
        merge_features(torch.ones(3, 2, 4), torch.ones(3), [0])
    with pytest.raises(ValueError, match="different numbers of patches"):
        merge_features([torch.ones(3, 2, 4), torch.ones(3, 5, 4)], torch.ones(4), [[0], [0]])
    with pytest.raises(ValueError, match="one index array per video"):
        merge_features([torch.ones(3, 2, 4), torch.ones(3, 2, 4)], torch.ones(4), [[0]])


def test_finite_values_whose_sum_overflows_are_accepted():
    frames = torch.full((4, 3), 3e38)
    frames[1] = -3e38
    assert len(select_keyframes(frames, torch.ones(3), max_keyframes=2)) >= 1
    frames[2, 0] = float("inf")
    with pytest.raises(ValueError, match="NaN or infinity"):
        select_keyframes(frames, torch.ones(3))
