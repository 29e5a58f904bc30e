"""Videos as embeddings: the :class:`VideoEmbedding` record and the packed 2-D layout.

scikit-learn's checks only run on 2-D arrays, and a ``Pipeline`` passes
arrays between its steps, so a batch of videos travels as one row per video::

    [PACKED_MARK, D, N, M | n_valid | query (D) | frames (N * D) | patches (N * M * D)]

The four header values say how to read the rest (``PACKED_MARK`` marks a
header, then the embedding width, frames per row and patches per frame), so
that the next step of a ``Pipeline`` reads the rows of
:class:`CLIPVideoEncoder` or :func:`pack_videos` with no argument.
``n_valid`` is the video's real length (shorter videos are zero-padded to
``N`` frames); ``M = 0`` means no patches, each frame then being its own one
patch. Rows without the header (hand-made ones) are read with the layout
given as ``dim``, ``n_frames`` and ``n_patches``. The estimators also take a
list of :class:`VideoEmbedding`, which needs no padding.
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

__all__ = ["HEADER_WIDTH", "PACKED_MARK", "VideoEmbedding", "pack_videos", "read_layout", "unpack_videos"]

#: First value of a packed row with a layout header: exact in float16, float32 and float64, and
#: no count of frames (``n_valid`` is the first value of a row without a header).
PACKED_MARK = -2047.0
#: Values of the layout header: the mark, ``dim``, ``n_frames``, ``n_patches``.
HEADER_WIDTH = 4
_WITHOUT_HEADER = ("rows without the header (not from pack_videos or CLIPVideoEncoder) are read with their layout "
                   "given: pass dim, n_frames and n_patches")


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


def layout_width(dim, n_frames, n_patches, header=True):
    """Columns of a packed row (with its layout header, or without)."""
    return (HEADER_WIDTH if header else 0) + 1 + dim + n_frames * dim + n_frames * n_patches * dim


def layout_sections(dim, n_frames, header=True):
    """Column slices of a packed row: query, frames, patches (to the end); ``n_valid`` is column ``start``."""
    start = HEADER_WIDTH if header else 0
    frames_end = start + 1 + dim + n_frames * dim
    return slice(start + 1, start + 1 + dim), slice(start + 1 + dim, frames_end), slice(frames_end, None)


def read_layout(X):
    """The layout ``(dim, n_frames, n_patches)`` that packed rows carry, or None for rows without one.

    Parameters
    ----------
    X : ndarray of shape (n_videos, width)

    Returns
    -------
    tuple of int or None
        None when the rows do not start with :data:`PACKED_MARK`.

    Raises
    ------
    ValueError
        If a row starts with the mark but the header is not one readable
        layout of the array's width, or the rows disagree.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.video import VideoEmbedding, pack_videos
    >>> from skicml.video._vilamp._layout import read_layout
    >>> read_layout(pack_videos([VideoEmbedding(np.ones((3, 2)), np.ones(2))]))
    (2, 3, 0)
    """
    X = np.asarray(X)
    if X.ndim != 2 or not X.shape[0] or X.shape[1] < HEADER_WIDTH or not (X[:, 0] == PACKED_MARK).any():
        return None
    header = X[:, :HEADER_WIDTH]
    if not (header == header[0]).all():
        rows = np.flatnonzero((header != header[0]).any(1))
        raise ValueError(f"row {rows[0]} has the layout header {header[rows[0]].tolist()} but row 0 has "
                         f"{header[0].tolist()}: packed rows of one array share one layout header "
                         f"[{PACKED_MARK:g}, dim, n_frames, n_patches]; {_WITHOUT_HEADER}.")
    _, dim, n_frames, n_patches = (float(v) for v in header[0])
    readable = all(np.isfinite(v) and v.is_integer() for v in (dim, n_frames, n_patches)) and \
        dim >= 1 and n_frames >= 1 and n_patches >= 0
    if not readable or layout_width(int(dim), int(n_frames), int(n_patches)) != X.shape[1]:
        raise ValueError(f"the rows start with the layout header [{PACKED_MARK:g}, dim, n_frames, n_patches] = "
                         f"{header[0].tolist()}, which is no layout of their {X.shape[1]} columns (a row holds "
                         f"{HEADER_WIDTH} + 1 + dim + n_frames * dim * (1 + n_patches) values); "
                         f"{_WITHOUT_HEADER}.")
    return int(dim), int(n_frames), int(n_patches)


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
    X : ndarray of shape (n_videos, 4 + 1 + dim + n_frames * dim * (1 + n_patches))
        Each row starts with the layout header ``[PACKED_MARK, dim,
        n_frames, n_patches]`` (:func:`read_layout` reads it), then the
        video's length, its query, its frames and its patches.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.video import VideoEmbedding, pack_videos, unpack_videos
    >>> videos = [VideoEmbedding(np.ones((3, 2)), np.ones(2)), VideoEmbedding(np.ones((5, 2)), np.ones(2))]
    >>> X = pack_videos(videos)
    >>> X.shape
    (2, 17)
    >>> X[0, :4].tolist()
    [-2047.0, 2.0, 5.0, 0.0]
    >>> [video.n_frames for video in unpack_videos(X)]
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
    X[:, :HEADER_WIDTH] = (PACKED_MARK, dim, n_frames, n_patches)
    query, frames, patches = layout_sections(dim, n_frames)
    for row, video in zip(X, videos):
        length = video.n_frames
        row[HEADER_WIDTH] = length
        row[query] = video.query
        row[frames].reshape(n_frames, dim)[:length] = video.frames
        if n_patches:
            row[patches].reshape(n_frames, n_patches, dim)[:length] = video.patches
    return X


def unpack_videos(X, dim=None, n_frames=None, n_patches=None):
    """The videos of packed rows, as :class:`VideoEmbedding` views (no copies).

    Parameters
    ----------
    X : ndarray of shape (n_videos, width)
    dim, n_frames, n_patches : int or None, default=None
        The layout (see :func:`pack_videos`). Rows with a layout header are
        read by it (what is given must agree); rows without one need
        ``dim`` and ``n_frames`` (``n_patches`` None is 0).

    Returns
    -------
    list of VideoEmbedding
        Each cut to its ``n_valid`` frames.
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"packed rows must be a 2-D array (one row per video), got shape {X.shape}.")
    given = {"dim": dim, "n_frames": n_frames, "n_patches": n_patches}
    layout = read_layout(X)
    if layout is not None:
        check_layout_agrees(layout, given)
        dim, n_frames, n_patches = layout
        header = True
    else:
        if dim is None or n_frames is None:
            raise ValueError(f"the rows have no layout header (their first value is not {PACKED_MARK:g}); "
                             f"{_WITHOUT_HEADER}.")
        n_patches = 0 if n_patches is None else n_patches
        header = False
    width = layout_width(dim, n_frames, n_patches, header)
    if X.shape[1] != width:
        raise ValueError(f"packed rows of dim={dim}, n_frames={n_frames}, n_patches={n_patches} have "
                         f"{width} columns, got an array of shape {X.shape}.")
    query, frame_columns, patch_columns = layout_sections(dim, n_frames, header)
    start = HEADER_WIDTH if header else 0
    videos = []
    for i, row in enumerate(X):
        length = row[start]
        if not (float(length).is_integer() and 1 <= length <= n_frames):
            raise ValueError(f"row {i} says it has {length!r} frames (its value n_valid, column {start}), "
                             f"outside 1..n_frames={n_frames}.")
        length = int(length)
        frames = row[frame_columns].reshape(n_frames, dim)[:length]
        patches = None
        if n_patches:
            patches = row[patch_columns].reshape(n_frames, n_patches, dim)[:length]
        videos.append(VideoEmbedding(frames=frames, query=row[query], patches=patches))
    return videos


def check_layout_agrees(layout, given):
    """Raise unless the layout given (``{name: int or None}``) is the one the rows' header says."""
    for (name, value), found in zip(given.items(), layout):
        if value is not None and value != found:
            raise ValueError(f"the rows' layout header says {name}={found}, but {name}={value} was given; "
                             "leave dim, n_frames and n_patches at None for rows with a header (from "
                             "pack_videos or CLIPVideoEncoder): they carry their layout.")


def _positive(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)
