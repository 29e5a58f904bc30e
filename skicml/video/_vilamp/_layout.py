"""Videos as embeddings: the :class:`VideoEmbedding` record and the packed 2-D layout.

scikit-learn's checks only run on 2-D arrays, and a ``Pipeline`` passes
arrays between its steps, so a batch of videos travels as one row per video::

    [n_valid | query (D) | frames (N * D) | patches (N * M * D)]

``n_valid`` is the video's real length (shorter videos are zero-padded to
``N`` frames); ``M = 0`` means no patches, each frame then being its own one
patch. The estimators also take a list of :class:`VideoEmbedding`, which
needs no padding.
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

__all__ = ["VideoEmbedding", "pack_videos", "unpack_videos"]


@dataclasses.dataclass
class VideoEmbedding:
    """The embeddings of one video and its query.

    Parameters
    ----------
    frames : ndarray of shape (n_frames, dim)
        One embedding per frame (what keyframe selection compares).
    query : ndarray of shape (dim,)
        The question's embedding, in the frames' space.
    patches : ndarray of shape (n_frames, n_patches, dim) or None, default=None
        Patch embeddings of every frame (what merging pools); None makes each
        frame its own single patch.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.video import VideoEmbedding
    >>> video = VideoEmbedding(frames=np.ones((5, 4)), query=np.ones(4))
    >>> video.n_frames, video.n_patches, video.dim
    (5, 0, 4)
    """

    frames: np.ndarray
    query: np.ndarray
    patches: np.ndarray | None = None

    @property
    def n_frames(self):
        return int(np.shape(self.frames)[0])

    @property
    def dim(self):
        return int(np.shape(self.frames)[1])

    @property
    def n_patches(self):
        return 0 if self.patches is None else int(np.shape(self.patches)[1])

    def patch_array(self):
        """The patches, or the frames as (n_frames, 1, dim) single patches."""
        return np.asarray(self.frames)[:, None, :] if self.patches is None else np.asarray(self.patches)


def layout_width(dim, n_frames, n_patches):
    """Columns of a packed row."""
    return 1 + dim + n_frames * dim + n_frames * n_patches * dim


def layout_sections(dim, n_frames):
    """Column slices of a packed row: query, frames, patches (to the end)."""
    frames_end = 1 + dim + n_frames * dim
    return slice(1, 1 + dim), slice(1 + dim, frames_end), slice(frames_end, None)


def check_video(video, name="video"):
    """A :class:`VideoEmbedding` with consistent, finite float arrays, or a clear error."""
    if not isinstance(video, VideoEmbedding):
        raise TypeError(f"{name} must be a VideoEmbedding, got {type(video).__name__}.")
    frames = np.asarray(video.frames)
    query = np.asarray(video.query)
    if frames.ndim != 2:
        raise ValueError(f"{name}.frames must be (n_frames, dim), got shape {frames.shape}.")
    if frames.shape[0] == 0:
        raise ValueError(f"{name} has no frames: every video needs at least one.")
    if query.shape != (frames.shape[1],):
        raise ValueError(f"{name}.query has shape {query.shape} but the frames have width {frames.shape[1]}: "
                         f"the query must be ({frames.shape[1]},).")
    arrays = {"frames": frames, "query": query}
    if video.patches is not None:
        patches = np.asarray(video.patches)
        if patches.ndim != 3 or patches.shape[0] != frames.shape[0] or patches.shape[2] != frames.shape[1]:
            raise ValueError(f"{name}.patches must be (n_frames, n_patches, dim) = ({frames.shape[0]}, M, "
                             f"{frames.shape[1]}), got shape {patches.shape}.")
        if patches.shape[1] == 0:
            raise ValueError(f"{name}.patches has no patches per frame; pass patches=None instead.")
        arrays["patches"] = patches
    for field, array in arrays.items():
        if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
            raise TypeError(f"{name}.{field} must hold real numbers, got dtype {array.dtype}.")
        # A sum is one pass without a boolean copy; NaN or infinity make it
        # non-finite (then, or on overflow, the exact test decides).
        with np.errstate(over="ignore", invalid="ignore"):
            total = array.sum()
        if not np.isfinite(total) and not np.isfinite(array).all():
            raise ValueError(f"{name}.{field} contains NaN or infinity.")
    return VideoEmbedding(frames=frames, query=query, patches=arrays.get("patches"))


def pack_videos(videos, *, n_frames=None, n_patches=None, dtype=np.float32):
    """Pack videos into one row each, zero-padding the shorter ones.

    Parameters
    ----------
    videos : list of VideoEmbedding
        All of one width ``dim`` and one number of patches.
    n_frames : int or None, default=None
        Frames per row; None takes the longest video. Longer videos are
        refused.
    n_patches : int or None, default=None
        Patches per frame of the layout; None takes the videos' (0 when they
        have none).
    dtype : numpy dtype, default=np.float32

    Returns
    -------
    X : ndarray of shape (n_videos, 1 + dim + n_frames * dim * (1 + n_patches))

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.video import VideoEmbedding, pack_videos, unpack_videos
    >>> videos = [VideoEmbedding(np.ones((3, 2)), np.ones(2)), VideoEmbedding(np.ones((5, 2)), np.ones(2))]
    >>> X = pack_videos(videos)
    >>> X.shape
    (2, 13)
    >>> [video.n_frames for video in unpack_videos(X, dim=2, n_frames=5)]
    [3, 5]
    """
    if isinstance(videos, VideoEmbedding):
        videos = [videos]
    videos = [check_video(video, f"videos[{i}]") for i, video in enumerate(videos)]
    if not videos:
        raise ValueError("videos is empty: pass at least one VideoEmbedding.")
    dims = {video.dim for video in videos}
    if len(dims) > 1:
        raise ValueError(f"the videos have different widths {sorted(dims)}.")
    dim = dims.pop()
    patch_counts = {video.n_patches for video in videos}
    if n_patches is None:
        if len(patch_counts) > 1:
            raise ValueError(f"the videos have different numbers of patches {sorted(patch_counts)}.")
        n_patches = patch_counts.pop()
    elif patch_counts != {n_patches}:
        raise ValueError(f"n_patches={n_patches} but the videos have {sorted(patch_counts)} patches per frame.")
    longest = max(video.n_frames for video in videos)
    n_frames = longest if n_frames is None else _positive(n_frames, "n_frames")
    if longest > n_frames:
        raise ValueError(f"a video has {longest} frames, more than n_frames={n_frames}.")
    X = np.zeros((len(videos), layout_width(dim, n_frames, n_patches)), dtype=dtype)
    query, frames, patches = layout_sections(dim, n_frames)
    for row, video in zip(X, videos):
        length = video.n_frames
        row[0] = length
        row[query] = video.query
        row[frames].reshape(n_frames, dim)[:length] = video.frames
        if n_patches:
            row[patches].reshape(n_frames, n_patches, dim)[:length] = video.patches
    return X


def unpack_videos(X, dim, n_frames, n_patches=0):
    """The videos of packed rows, as :class:`VideoEmbedding` views (no copies).

    Parameters
    ----------
    X : ndarray of shape (n_videos, width)
    dim, n_frames, n_patches : int
        The layout (see :func:`pack_videos`).

    Returns
    -------
    list of VideoEmbedding
        Each cut to its ``n_valid`` frames.
    """
    X = np.asarray(X)
    width = layout_width(dim, n_frames, n_patches)
    if X.ndim != 2 or X.shape[1] != width:
        raise ValueError(f"packed rows of dim={dim}, n_frames={n_frames}, n_patches={n_patches} have "
                         f"{width} columns, got an array of shape {X.shape}.")
    query, frame_columns, patch_columns = layout_sections(dim, n_frames)
    videos = []
    for i, row in enumerate(X):
        length = row[0]
        if not (float(length).is_integer() and 1 <= length <= n_frames):
            raise ValueError(f"row {i} says it has {length!r} frames (its first column), outside "
                             f"1..n_frames={n_frames}.")
        length = int(length)
        frames = row[frame_columns].reshape(n_frames, dim)[:length]
        patches = None
        if n_patches:
            patches = row[patch_columns].reshape(n_frames, n_patches, dim)[:length]
        videos.append(VideoEmbedding(frames=frames, query=row[query], patches=patches))
    return videos


def _positive(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)
