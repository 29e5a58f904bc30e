"""ViLAMP's two differential steps as plain torch functions.

- :func:`select_keyframes` (differential keyframe selection, DKS): frames
  taken in order of query relevance while each stays at most
  ``redundancy_threshold`` similar to every frame already taken.
- :func:`merge_features` (differential feature merging, DFM): keyframes keep
  all their patches; every other frame becomes one token, the softmax-weighted
  mean of its patches, a patch weighing more the more it resembles the query
  and the less it resembles the same patch of its reference keyframe.

Both take one video as tensors, or a list of videos of different lengths.
Similarities are cosines, so every result is invariant to the scale of each
embedding.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F

from ...ops import differential_merge

__all__ = ["keyframe_references", "merge_features", "select_keyframes"]

_FILLS = ("none", "gaps")
_REFERENCES = ("preceding", "nearest", "official")
# F.normalize's floor: a zero embedding has cosine 0 with everything, never NaN.
_EPS = 1e-12


# --------------------------------------------------------------------------
# input checks
# --------------------------------------------------------------------------
def _all_finite(tensor):
    """Whether a tensor holds no NaN or infinity, in one pass without a boolean copy.

    NaN or infinity make the sum non-finite; only when it is (which an
    overflow of finite values can also cause) is the element-wise test run.
    """
    if not tensor.numel():
        return True
    total = tensor.sum(dtype=torch.float32) if tensor.element_size() < 4 else tensor.sum()
    if torch.isfinite(total):
        return True
    return bool(torch.isfinite(tensor).all())


def _as_float_tensor(value, name, ndim):
    tensor = torch.as_tensor(value)
    if not (tensor.is_floating_point() or tensor.dtype in (torch.int32, torch.int64, torch.uint8)):
        raise TypeError(f"{name} must hold real numbers, got dtype {tensor.dtype}.")
    if not tensor.is_floating_point():
        tensor = tensor.float()
    if tensor.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(tensor.shape)}.")
    if not _all_finite(tensor):
        raise ValueError(f"{name} contains NaN or infinity.")
    return tensor


def _videos(value, name, ndim):
    """``(list of tensors, single)``: one video as a tensor, or several in a list or tuple."""
    single = not isinstance(value, (list, tuple))
    items = [value] if single else list(value)
    if not items:
        raise ValueError(f"{name} is an empty list: pass at least one video.")
    videos = []
    for i, item in enumerate(items):
        what = name if single else f"{name}[{i}]"
        video = _as_float_tensor(item, what, ndim)
        if video.shape[0] == 0:
            raise ValueError(f"{what} has no frames: every video needs at least one.")
        videos.append(video)
    return videos, single


def _queries(value, n_videos, dim, name="query"):
    """One (D,) query per video, from a (D,) vector shared by all or a (n_videos, D) array."""
    if isinstance(value, (list, tuple)):
        value = torch.stack([torch.as_tensor(v) for v in value]) if len(value) else torch.empty(0)
    query = torch.as_tensor(value)
    if not query.is_floating_point():
        query = query.float()
    if query.dim() == 1:
        query = query.expand(n_videos, -1)
    if query.dim() != 2 or query.shape[0] != n_videos:
        raise ValueError(f"{name} must be one (D,) vector or one row per video ({n_videos}), "
                         f"got shape {tuple(query.shape)}.")
    if query.shape[1] != dim:
        raise ValueError(f"{name} has width {query.shape[1]} but the frames have width {dim}.")
    if not _all_finite(query):
        raise ValueError(f"{name} contains NaN or infinity.")
    return query


def _check_count(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def _check_choice(value, name, options):
    if value not in options:
        raise ValueError(f"{name}={value!r}; expected one of {', '.join(map(repr, options))}.")
    return value


# --------------------------------------------------------------------------
# differential keyframe selection
# --------------------------------------------------------------------------
def select_keyframes(frames, query, max_keyframes=32, redundancy_threshold=0.85, min_relevance=None,
                     fill="none"):
    """Choose the keyframes of one video or of a batch of videos (DKS).

    Frames are visited in decreasing cosine with the query (ties to the
    earlier frame); a frame is taken unless its cosine with a frame already
    taken exceeds ``redundancy_threshold``, until ``max_keyframes`` are taken
    or the frames run out. This is the official selector's rule, computed in
    ``max_keyframes`` vectorised rounds (one matrix-vector product per round)
    instead of an ``N x N`` similarity matrix and a loop over frames.

    Parameters
    ----------
    frames : array-like of shape (n_frames, dim), or a list of them
        Frame embeddings of one video, or of several videos of any lengths.
    query : array-like of shape (dim,) or (n_videos, dim)
        The query embedding, shared by all videos or one per video.
    max_keyframes : int, default=32
        At most this many keyframes per video (the official ``max_frame_num``);
        a video with fewer frames keeps them all at most.
    redundancy_threshold : float, default=0.85
        Frames whose cosine with a keyframe is above it are never taken (the
        official ``f2f_thrd``); 1 or more turns the rule off (plain top-k by
        relevance). Must lie in [-1, 1] or be at least 1.
    min_relevance : float or None, default=None
        Frames whose cosine with the query is below it are never taken (the
        official ``f2t_thrd``, 0.2 at the scale of OpenAI's CLIP); None turns
        it off. When no frame passes, ``min(max_keyframes, n_frames)`` frames
        evenly spaced over the video are returned (the official fallback).
    fill : {"none", "gaps"}, default="none"
        ``"gaps"`` spreads the keyframes left over after the greedy pass
        over the gaps between those taken, longest gaps first, as the official
        ``distribute_frames`` does, so that every video gets exactly
        ``min(max_keyframes, n_frames)`` keyframes; frames added this way may
        break the redundancy rule.

    Returns
    -------
    keyframes : torch.LongTensor of shape (n_keyframes,), or a list of them
        Sorted frame indices of each video (a list for a list input).

    Examples
    --------
    >>> import torch
    >>> from skicml.video import select_keyframes
    >>> frames = torch.tensor([[1.0, 0.0], [0.99, 0.1], [0.0, 1.0], [0.7, 0.7]])
    >>> select_keyframes(frames, torch.tensor([1.0, 0.0]), max_keyframes=3)
    tensor([0, 2, 3])
    >>> select_keyframes(frames, torch.tensor([1.0, 0.0]), max_keyframes=2, redundancy_threshold=1.0)
    tensor([0, 1])
    """
    videos, single = _videos(frames, "frames", 2)
    dims = {video.shape[1] for video in videos}
    if len(dims) > 1:
        raise ValueError(f"the videos' frames have different widths {sorted(dims)}.")
    dim = dims.pop()
    queries = _queries(query, len(videos), dim)
    max_keyframes = _check_count(max_keyframes, "max_keyframes")
    threshold = float(redundancy_threshold)
    if math.isnan(threshold) or threshold < -1:
        raise ValueError(f"redundancy_threshold={redundancy_threshold!r} must be at least -1 (a cosine).")
    if min_relevance is not None and not math.isfinite(float(min_relevance)):
        raise ValueError(f"min_relevance={min_relevance!r} must be a finite number or None.")
    _check_choice(fill, "fill", _FILLS)

    chosen = _greedy_keyframes(videos, queries, max_keyframes, threshold, min_relevance)
    out = []
    for video, keyframes in zip(videos, chosen):
        n_frames = video.shape[0]
        budget = min(max_keyframes, n_frames)
        if not keyframes:
            keyframes = _evenly_spaced(n_frames, budget) if fill == "none" else []
        if fill == "gaps":
            keyframes = _fill_gaps(sorted(keyframes), n_frames, budget)
        out.append(torch.tensor(sorted(keyframes), dtype=torch.long))
    return out[0] if single else out


def _greedy_keyframes(videos, queries, max_keyframes, threshold, min_relevance):
    """The greedy pass for every video at once, on padded normalised frames."""
    lengths = torch.tensor([video.shape[0] for video in videos])
    wide = any(v.dtype == torch.float64 for v in videos) or queries.dtype == torch.float64
    dtype = torch.float64 if wide else torch.float32
    units = torch.nn.utils.rnn.pad_sequence([F.normalize(v.to(dtype), dim=1, eps=_EPS) for v in videos],
                                            batch_first=True)
    query_units = F.normalize(queries.to(dtype), dim=1, eps=_EPS)
    relevance = torch.einsum("bnd,bd->bn", units, query_units)
    eligible = torch.arange(units.shape[1])[None, :] < lengths[:, None]
    if min_relevance is not None:
        eligible &= relevance >= float(min_relevance)
    chosen = [[] for _ in videos]
    rows = torch.arange(len(videos))
    for _ in range(max_keyframes):
        score = relevance.masked_fill(~eligible, -math.inf)
        best = score.argmax(dim=1)  # the first maximum: ties go to the earlier frame
        active = eligible.any(dim=1)
        if not active.any():
            break
        best_units = units[rows, best]
        eligible[rows[active], best[active]] = False
        # Strictly above the threshold is redundant, as in the official selector.
        redundant = torch.einsum("bnd,bd->bn", units, best_units) > threshold
        eligible &= ~(redundant & active[:, None])
        for b in rows[active].tolist():
            chosen[b].append(int(best[b]))
    return chosen


def _evenly_spaced(n_frames, count):
    return sorted({int(round(x)) for x in torch.linspace(0, n_frames - 1, count).tolist()})


def _fill_gaps(keyframes, n_frames, budget):
    """Spread ``budget - len(keyframes)`` more frames over the gaps, as ``distribute_frames`` does.

    The smallest spacing ``d`` is found such that ``ceil(len / d) - 1`` frames
    per gap fit the budget; each gap gets them evenly spaced, and what is left
    is taken from the end of the last gaps backwards.
    """
    leftover = budget - len(keyframes)
    if leftover <= 0:
        return keyframes
    taken = set(keyframes)
    bounds = [-1, *keyframes, n_frames]
    gaps = [(a + 1, b - 1) for a, b in zip(bounds[:-1], bounds[1:]) if b - a > 1]

    def needed(spacing):
        return sum(math.ceil((end - start + 1) / spacing) - 1 for start, end in gaps)

    low, high = 1, n_frames
    while low < high:
        middle = (low + high) // 2
        if needed(middle) <= leftover:
            high = middle
        else:
            low = middle + 1
    for start, end in gaps:
        length = end - start + 1
        count = math.ceil(length / low) - 1
        step = math.ceil(length / (count + 1))
        for i in range(1, count + 1):
            taken.add(min(start + step * i, end))
    # Clipped positions can coincide: count what was really added, so that
    # the video always ends with exactly ``budget`` keyframes.
    leftover = budget - len(taken)
    for start, end in reversed(gaps):
        for position in range(end, start - 1, -1):
            if leftover <= 0:
                break
            if position not in taken:
                taken.add(position)
                leftover -= 1
    return sorted(taken)


# --------------------------------------------------------------------------
# differential feature merging
# --------------------------------------------------------------------------
def keyframe_references(keyframes, n_frames, rule="preceding"):
    """The reference frame each frame's patches are compared with in :func:`merge_features`.

    Parameters
    ----------
    keyframes : array-like of int
        Sorted, distinct keyframe indices of one video (at least one).
    n_frames : int
    rule : {"preceding", "nearest", "official"}, default="preceding"
        ``"preceding"`` (the paper's rule): the last keyframe at or before the
        frame, and the first keyframe for frames before it. ``"nearest"``:
        the keyframe closest in time (the earlier one on a tie).
        ``"official"``: what the released code computes, for parity with its
        weights: frames before the first keyframe are their own reference,
        and the frames from the i-th keyframe on are compared with frame
        ``i`` (not with the i-th keyframe).

    Returns
    -------
    torch.LongTensor of shape (n_frames,)
        A frame index per frame; ``-1`` where the reference is the frame
        itself (``"official"`` only).

    Examples
    --------
    >>> from skicml.video import keyframe_references
    >>> keyframe_references([2, 6], 8)
    tensor([2, 2, 2, 2, 2, 2, 6, 6])
    >>> keyframe_references([2, 6], 8, rule="nearest")
    tensor([2, 2, 2, 2, 2, 6, 6, 6])
    >>> keyframe_references([2, 6], 8, rule="official")
    tensor([-1, -1,  0,  0,  0,  0,  1,  1])
    """
    _check_choice(rule, "reference", _REFERENCES)
    keyframes = torch.as_tensor(keyframes, dtype=torch.long)
    frames = torch.arange(int(n_frames))
    # Index of the last keyframe at or before each frame (-1 before the first).
    segment = torch.searchsorted(keyframes, frames, right=True) - 1
    if rule == "official":
        return torch.where(segment >= 0, segment, torch.full_like(segment, -1))
    preceding = keyframes[segment.clamp(min=0)]
    if rule == "preceding":
        return preceding
    following = keyframes[(segment + 1).clamp(max=len(keyframes) - 1)]
    closer_after = (following - frames) < (frames - preceding)
    return torch.where((segment < 0) | closer_after, following, preceding)


def merge_features(patches, query, keyframes, *, merge_lambda=1.0, temperature=0.01, reference="preceding",
                   keyframe_pool=1, return_weights=False):
    """Compress the patches of one video or of a batch of videos (DFM).

    Keyframes keep their patches (spatially pooled by ``keyframe_pool``);
    every other frame ``n`` becomes one token ``sum_m w_m p_m`` with
    ``w = softmax_m((cos(p_m, q) - merge_lambda * cos(p_m, r_m)) / temperature)``,
    ``r`` the patches of its reference keyframe (see
    :func:`keyframe_references`). Tokens come in temporal order. The merge
    runs through the fused op :func:`skicml.ops.differential_merge`, which
    reads the patch tensor once.

    Parameters
    ----------
    patches : array-like of shape (n_frames, n_patches, dim), or a list of them
        Patch embeddings of each video, in the query's space.
    query : array-like of shape (dim,) or (n_videos, dim)
    keyframes : array-like of int, or a list of them
        The keyframes of each video (:func:`select_keyframes`): distinct
        indices within the video, at least one.
    merge_lambda : float, default=1.0
        Weight of the redundancy term (the paper's lambda; 0 merges by
        relevance alone).
    temperature : float, default=0.01
        Softmax temperature of the merge (the official initial value); large
        values give the plain mean of the patches.
    reference : {"preceding", "nearest", "official"}, default="preceding"
        Which keyframe a frame is compared with; see :func:`keyframe_references`.
    keyframe_pool : int, default=1
        Keyframe patches on a square grid are bilinearly downsampled by this
        factor (2 turns the official 27 x 27 grid into 14 x 14).
    return_weights : bool, default=False
        Also return each frame's merge weights.

    Returns
    -------
    tokens : torch.Tensor of shape (n_tokens, dim), or a list of them
        ``n_tokens = n_keyframes * pooled_patches + n_frames - n_keyframes``.
    token_types : torch.LongTensor of shape (n_tokens,), or a list of them
        1 for a keyframe's patch token, 0 for a merged frame.
    weights : torch.Tensor of shape (n_frames, n_patches), or a list of them
        Only with ``return_weights``: the merge weights of each merged frame;
        keyframes' rows are NaN.

    Examples
    --------
    >>> import torch
    >>> from skicml.video import merge_features
    >>> patches = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.6, 0.8]]])
    >>> tokens, types = merge_features(patches, torch.tensor([1.0, 0.0]), [0], temperature=1.0)
    >>> types
    tensor([1, 1, 0])
    >>> tokens[2]
    tensor([0.8199, 0.3601])
    """
    videos, single = _videos(patches, "patches", 3)
    if single:
        keyframes = [keyframes]
    elif not isinstance(keyframes, (list, tuple)) or len(keyframes) != len(videos):
        raise ValueError(f"keyframes must be a list with one index array per video ({len(videos)}).")
    widths = {video.shape[1:] for video in videos}
    if len({shape[1] for shape in widths}) > 1:
        raise ValueError(f"the videos' patches have different widths {sorted(s[1] for s in widths)}.")
    if len({shape[0] for shape in widths}) > 1:
        raise ValueError(f"the videos have different numbers of patches per frame "
                         f"{sorted(s[0] for s in widths)}.")
    queries = _queries(query, len(videos), videos[0].shape[2])
    temperature = float(temperature)
    if not temperature > 0 or not math.isfinite(temperature):
        raise ValueError(f"temperature={temperature!r} must be a positive finite number.")
    if not math.isfinite(float(merge_lambda)):
        raise ValueError(f"merge_lambda={merge_lambda!r} must be a finite number.")
    _check_choice(reference, "reference", _REFERENCES)
    keyframe_pool = _check_count(keyframe_pool, "keyframe_pool")

    tokens, types, weights = [], [], []
    for i, (video, key) in enumerate(zip(videos, keyframes)):
        key = check_keyframes(key, video.shape[0], "keyframes" if single else f"keyframes[{i}]")
        refs = keyframe_references(key, video.shape[0], reference)
        merged = torch.ones(video.shape[0], dtype=torch.bool)
        merged[key] = False
        frame_index = merged.nonzero().flatten()
        ref_index = refs[frame_index]
        query_row = queries[i].to(video.dtype)[None]
        merged_tokens, frame_weights = differential_merge(
            video, query_row, frame_index, ref_index, torch.zeros_like(frame_index),
            merge_lambda=float(merge_lambda), temperature=temperature)
        keyframe_tokens = pool_keyframe_patches(video[key], keyframe_pool)
        sequence, token_types = interleave_tokens(key, video.shape[0], keyframe_tokens, merged_tokens)
        tokens.append(sequence)
        types.append(token_types)
        if return_weights:
            full = torch.full(video.shape[:2], math.nan, dtype=frame_weights.dtype)
            full[frame_index] = frame_weights
            weights.append(full)
    if single:
        return (tokens[0], types[0], weights[0]) if return_weights else (tokens[0], types[0])
    return (tokens, types, weights) if return_weights else (tokens, types)


def check_keyframes(keyframes, n_frames, name="keyframes"):
    """Sorted distinct keyframe indices of a video of ``n_frames`` frames, or a clear error."""
    key = torch.as_tensor(keyframes)
    if key.numel() == 0:
        raise ValueError(f"{name} is empty: every video needs at least one keyframe.")
    if key.dtype.is_floating_point or key.dtype == torch.bool or key.dim() != 1:
        raise ValueError(f"{name} must be a 1-D array of frame indices, got {tuple(key.shape)} "
                         f"of dtype {key.dtype}.")
    key = key.long()
    if key.numel() > n_frames:
        raise ValueError(f"{name} has {key.numel()} keyframes but the video has only {n_frames} frames.")
    if (key < 0).any() or (key >= n_frames).any():
        raise ValueError(f"{name} holds indices outside [0, {n_frames}): {key.tolist()}.")
    key = torch.sort(key).values
    if (key[1:] == key[:-1]).any():
        raise ValueError(f"{name} holds repeated frame indices: {key.tolist()}.")
    return key


def pool_keyframe_patches(patches, factor):
    """Bilinearly downsample (K, M, D) keyframe patches on their square grid by ``factor``."""
    if factor == 1:
        return patches
    side = math.isqrt(patches.shape[1])
    if side * side != patches.shape[1]:
        raise ValueError(f"keyframe_pool={factor} needs the patches on a square grid, but a frame has "
                         f"{patches.shape[1]} patches.")
    size = math.ceil(side / factor)
    grid = patches.unflatten(1, (side, side)).permute(0, 3, 1, 2)
    pooled = F.interpolate(grid.float(), size=(size, size), mode="bilinear", align_corners=False)
    return pooled.to(patches.dtype).permute(0, 2, 3, 1).flatten(1, 2)


def interleave_tokens(keyframes, n_frames, keyframe_tokens, merged_tokens):
    """Keyframe tokens (K, M', D) and merged tokens (N - K, D) in temporal order, with their types."""
    n_key, per_key = keyframe_tokens.shape[:2]
    is_key = torch.zeros(n_frames, dtype=torch.bool)
    is_key[keyframes] = True
    counts = torch.where(is_key, per_key, 1)
    starts = torch.cumsum(counts, 0) - counts
    dim = merged_tokens.shape[-1] if merged_tokens.numel() or not keyframe_tokens.numel() \
        else keyframe_tokens.shape[-1]
    sequence = keyframe_tokens.new_empty((int(counts.sum()), dim))
    types = torch.zeros(int(counts.sum()), dtype=torch.long)
    sequence[starts[~is_key]] = merged_tokens.to(sequence.dtype)
    key_positions = (starts[is_key][:, None] + torch.arange(per_key)).flatten()
    sequence[key_positions] = keyframe_tokens.reshape(n_key * per_key, -1)
    types[key_positions] = 1
    return sequence, types
