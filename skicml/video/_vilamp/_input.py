"""What the ViLAMP estimators share: their compression parameters and how they read videos."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.utils.validation import validate_data

from ...utils.param_validation import Integral, Interval, Real, StrOptions
from ._functional import _evenly_spaced, select_keyframes
from ._layout import VideoEmbedding, check_layout_agrees, check_video, layout_width, read_layout, unpack_videos

COMPRESSION_CONSTRAINTS = {
    "max_keyframes": [Interval(Integral, 1, None, closed="left")],
    "redundancy_threshold": [Interval(Real, -1, None, closed="left")],
    "min_relevance": [Real, None],
    "fill": [StrOptions({"none", "gaps"})],
    "selector": [StrOptions({"differential", "uniform"})],
    "merge_lambda": [Real],
    "merge_temperature": [Interval(Real, 0, None, closed="neither")],
    "reference": [StrOptions({"preceding", "nearest", "official"})],
    "keyframe_pool": [Interval(Integral, 1, None, closed="left")],
    "dim": [Interval(Integral, 1, None, closed="left"), None],
    "n_frames": [Interval(Integral, 1, None, closed="left"), None],
    "n_patches": [Interval(Integral, 0, None, closed="left"), None],
}

COMPRESSION_DOC = """\
    max_keyframes : int, default=32
        Keyframes per video at most (the official ``max_frame_num``).
    redundancy_threshold : float, default=0.85
        A frame more similar than this (cosine) to a keyframe is never taken
        (the official ``f2f_thrd``); 1 gives plain top-k by relevance.
    min_relevance : float or None, default=None
        Frames less relevant than this (cosine with the query) are never
        taken; None turns it off. The official runtime uses 0.2 (its
        config's ``f2t_thrd``), a value specific to the scale of OpenAI's
        CLIP ViT-B/32 cosines: on the pixel benchmark (shipped tiny CLIP,
        doc/video.rst, ``vilamp-pixels``) 0.2 lowered event recall at a
        tenth of the tokens from 0.809 to 0.769 (3 seeds), so it is off
        unless set for a known model.
    fill : {"none", "gaps"}, default="none"
        ``"gaps"`` spreads the keyframes the greedy pass left unused over the
        gaps between keyframes, as the official ``distribute_frames``, which
        the official runtime always runs, so that every video gets exactly
        ``min(max_keyframes, n_frames)`` keyframes (the added ones may break
        the redundancy threshold). ``"none"`` keeps only what the greedy
        rule takes (the paper's Algorithm 1). On the pixel benchmark it kept
        the same event recall (0.806 against 0.809) with 931 tokens a video
        instead of 1,500 at ``max_keyframes=20``; use ``"gaps"`` to spend a
        fixed budget, as in comparisons at equal tokens.
    selector : {"differential", "uniform"}, default="differential"
        ``"uniform"`` takes ``max_keyframes`` evenly spaced frames instead
        of DKS: the baseline at the same token budget.
    merge_lambda : float, default=1.0
        Weight of the redundancy term of the merge (0: relevance only).
    merge_temperature : float, default=0.01
        Softmax temperature of the merge (initial value when learnable); a
        large value gives plain mean pooling of each frame's patches.
    reference : {"preceding", "nearest", "official"}, default="preceding"
        Which keyframe a frame's patches are compared with (see
        :func:`skicml.video.keyframe_references`).
    keyframe_pool : int, default=1
        Bilinear downsampling factor of the keyframes' patch grids (which
        must then be square). The official runtime always pools by 2 (its
        27 x 27 SigLIP grid to 14 x 14); 1 keeps every patch, and works on
        any number of patches. At a fixed token budget, 2 buys about four
        times the keyframes: on the pixel benchmark (8 x 8 grids, a tenth
        of the tokens) 89 keyframes of 16 tokens recalled every event
        (1.000) where 20 of 64 recalled 0.809 (3 seeds).
    dim, n_frames, n_patches : int or None, default=None
        The packed layout of 2-D rows without a layout header: embedding
        width, frames per row, patches per frame (0: none). One of
        ``n_frames`` and ``n_patches`` may be left None and is inferred from
        the width. Rows of :func:`skicml.video.pack_videos` and
        :class:`skicml.video.CLIPVideoEncoder` carry their layout in a
        header and need none of these (given, they must agree with it), so
        the encoder and this estimator make a ``Pipeline`` as they are.
        Rows without a header and all three None are each read as a video
        of one frame with a zero query, the degenerate layout that keeps
        scikit-learn's checks meaningful.
"""


def query_matrix(videos, dtype):
    """The (n_videos, dim) tensor of the videos' queries, in ``dtype``."""
    return torch.from_numpy(np.stack([np.asarray(v.query) for v in videos])).to(dtype)


def _check_not_records(X):
    """Refuse tuples and dicts of arrays where :class:`VideoEmbedding` records belong (rows of numbers pass)."""
    for i, item in enumerate(X):
        if isinstance(item, dict) or (isinstance(item, (tuple, list)) and any(
                isinstance(part, (np.ndarray, list, tuple)) and np.ndim(part) >= 1 for part in item)):
            raise TypeError(f"X[{i}] is a {type(item).__name__} of arrays; pass each video as "
                            "VideoEmbedding(frames, query, patches) (patches may be None), or packed rows "
                            "(skicml.video.pack_videos).")


class VideoInputMixin:
    """Layout resolution and video reading for the ViLAMP estimators."""

    def _check_layout(self, X):
        """``(dim, n_frames, n_patches)`` of 2-D rows (from their header or the parameters), or None."""
        dim, n_frames, n_patches = self.dim, self.n_frames, self.n_patches
        layout = read_layout(X)
        if layout is not None:
            check_layout_agrees(layout, {"dim": dim, "n_frames": n_frames, "n_patches": n_patches})
            return layout
        n_features = X.shape[1]
        if dim is None and n_frames is None and n_patches is None:
            return None
        if dim is None:
            raise ValueError("the packed layout needs dim (the embedding width) when n_frames or "
                             "n_patches is set.")
        if n_frames is None and n_patches is None:
            raise ValueError("the packed layout needs n_frames or n_patches beside dim; the other is "
                             "inferred from the width of X.")
        if n_frames is None:
            n_frames, rest = divmod(n_features - 1 - dim, dim * (1 + n_patches))
        elif n_patches is None:
            n_patches, rest = divmod(n_features - 1 - dim - n_frames * dim, n_frames * dim)
        else:
            rest = 0
        if n_frames is None or n_frames < 1 or n_patches < 0 or rest or \
                layout_width(dim, n_frames, n_patches, header=False) != n_features:
            raise ValueError(
                f"X has {n_features} columns, which is no packed layout of dim={self.dim}, "
                f"n_frames={self.n_frames}, n_patches={self.n_patches}: a row without a layout header holds "
                "1 + dim + n_frames * dim * (1 + n_patches) values (see skicml.video.pack_videos)."
            )
        return int(dim), int(n_frames), int(n_patches)

    def _read_videos(self, X, reset):
        """``list of VideoEmbedding`` from packed rows, single-frame rows or a list of videos."""
        if isinstance(X, (list, tuple)):
            if not X:
                raise ValueError("X holds no videos: pass a list of VideoEmbedding (or packed rows), at least one.")
            _check_not_records(X)
        if isinstance(X, VideoEmbedding) or (isinstance(X, (list, tuple)) and X and
                                             isinstance(X[0], VideoEmbedding)):
            videos = [X] if isinstance(X, VideoEmbedding) else list(X)
            videos = [check_video(video, f"X[{i}]") for i, video in enumerate(videos)]
            dims = {video.dim for video in videos}
            patches = {video.n_patches for video in videos}
            if len(dims) > 1 or len(patches) > 1:
                raise ValueError(f"the videos of X have different widths {sorted(dims)} or patch counts "
                                 f"{sorted(patches)}.")
            if reset:
                if hasattr(self, "n_features_in_"):
                    del self.n_features_in_
                self.layout_ = "videos"
                self.dim_, self.n_patches_ = dims.pop(), patches.pop()
                self.n_frames_ = max(video.n_frames for video in videos)
            elif self.layout_ == "single_frame" or (self.dim_, self.n_patches_) != (dims.pop(), patches.pop()):
                raise ValueError(f"X's videos do not match the layout seen in fit (dim={self.dim_}, "
                                 f"n_patches={self.n_patches_}).")
            return videos
        X = validate_data(self, X, reset=reset, dtype=(np.float32, np.float64))
        if reset:
            layout = self._check_layout(X)
            if layout is None:
                self.layout_, self.dim_, self.n_frames_, self.n_patches_ = "single_frame", X.shape[1], 1, 0
            else:
                self.layout_ = "packed"
                self.dim_, self.n_frames_, self.n_patches_ = layout
        elif self.layout_ == "videos":
            raise ValueError("this estimator was fitted on a list of VideoEmbedding; pass one again.")
        if self.layout_ == "single_frame":
            zero = np.zeros(X.shape[1], dtype=X.dtype)
            return [VideoEmbedding(frames=row[None, :], query=zero) for row in X]
        # Rows with a header are read by it (and checked against the layout of fit), rows without one by
        # the layout of fit.
        return unpack_videos(X, self.dim_, self.n_frames_, self.n_patches_)

    def _select(self, videos):
        """Keyframe indices (torch.LongTensor) of each video."""
        if self.selector == "uniform":
            return [torch.tensor(_evenly_spaced(v.n_frames, min(self.max_keyframes, v.n_frames)))
                    for v in videos]
        frames = [torch.from_numpy(np.ascontiguousarray(v.frames)) for v in videos]
        return select_keyframes(frames, query_matrix(videos, frames[0].dtype), self.max_keyframes,
                                self.redundancy_threshold, self.min_relevance, self.fill)

    def _tokens_per_keyframe(self):
        patches = max(self.n_patches_, 1)
        if self.keyframe_pool == 1:
            return patches
        side = int(round(patches ** 0.5))
        return (-(-side // self.keyframe_pool)) ** 2
