"""``ClusterKeyframeCompressor``: the KMeans keyframe baseline of the official code, on ViLAMP's merge."""

from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning

from ...utils.param_validation import Integral, Interval, Real, StrOptions
from ._compressor import _TokenCompressor

__all__ = ["ClusterKeyframeCompressor", "cluster_keyframes"]


def _unit(x):
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norm, 1e-12)


def cluster_keyframes(frames, query, max_keyframes=32, n_clusters=64, random_state=0):
    """Keyframes of one video by KMeans clusters: the official ``ClusterFrameSelector``.

    The frames (unit-normalised) are cut into ``n_clusters`` KMeans
    clusters; the frame most relevant to the query (cosine) represents its
    cluster, and the ``max_keyframes`` most relevant representatives are
    the keyframes. Diversity comes from the clusters, relevance only ranks
    them: a cluster of one event is taken if it is among the most relevant
    clusters, however many near-duplicates it holds.

    Parameters
    ----------
    frames : array-like of shape (n_frames, dim)
    query : array-like of shape (dim,)
    max_keyframes : int, default=32
    n_clusters : int or None, default=64
        Clusters (at most ``n_frames``); None makes one per keyframe. With
        fewer clusters than ``max_keyframes``, fewer keyframes are taken.
    random_state : int, RandomState instance or None, default=0
        Seeds KMeans (the official code fixes 0).

    Returns
    -------
    ndarray of int64
        Sorted keyframe indices, ``min(max_keyframes, n_clusters, n_frames)``
        of them.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.video import cluster_keyframes
    >>> frames = np.array([[1.0, 0.0], [1.0, 0.05], [0.0, 1.0], [0.05, 1.0], [0.7, 0.7]])
    >>> cluster_keyframes(frames, np.array([1.0, 0.2]), max_keyframes=2, n_clusters=3).tolist()
    [1, 4]
    """
    frames = np.asarray(frames, dtype=np.float64)
    query = np.asarray(query, dtype=np.float64)
    n = len(frames)
    count = min(int(max_keyframes if n_clusters is None else n_clusters), n)
    units = _unit(frames)
    relevance = units @ _unit(query)
    if count >= n:
        labels = np.arange(n)
    else:
        with warnings.catch_warnings():
            # Fewer distinct frames than clusters: KMeans says so, and its clusters are still a partition.
            warnings.simplefilter("ignore", ConvergenceWarning)
            labels = KMeans(n_clusters=count, n_init="auto", random_state=random_state).fit_predict(units)
    # The most relevant frame of each cluster (the earlier one on a tie): frames in order of
    # decreasing relevance, the first of each label.
    order = np.lexsort((np.arange(n), -relevance))
    _, first = np.unique(labels[order], return_index=True)
    representatives = order[np.sort(first)]  # in order of decreasing relevance
    return np.sort(representatives[:max_keyframes]).astype(np.int64)


class ClusterKeyframeCompressor(_TokenCompressor):
    """Compress long videos with KMeans keyframes: the cluster baseline of the official code.

    The keyframes are chosen as the official ``ClusterFrameSelector`` does
    (:func:`cluster_keyframes`): KMeans clusters of the frame embeddings,
    the most query-relevant frame of each cluster, the ``max_keyframes``
    most relevant of those. Everything else is :class:`ViLAMPCompressor`'s:
    keyframes keep their patches, every other frame is merged into one
    token by differential feature merging, and the outputs and the packed
    layout are the same. So at one token budget it differs from ViLAMP's
    differential keyframe selection only in which frames it keeps: diverse
    by clusters rather than by a similarity threshold.

    Parameters
    ----------
    max_keyframes : int, default=32
        Keyframes per video at most.
    n_clusters : int or None, default=64
        KMeans clusters per video (the official 64), at most the video's
        frames; None makes ``max_keyframes`` clusters. Fewer clusters than
        ``max_keyframes`` take fewer keyframes.
    merge_lambda : float, default=1.0
        Weight of the redundancy term of the merge (0: relevance only).
    merge_temperature : float, default=0.01
        Softmax temperature of the merge; a large value gives mean pooling.
    reference : {"preceding", "nearest", "official"}, default="preceding"
        Which keyframe a frame's patches are compared with (see
        :func:`skicml.video.keyframe_references`).
    keyframe_pool : int, default=1
        Bilinear downsampling factor of the keyframes' patch grids.
    output : {"pooled", "tokens", "selection"}, default="pooled"
        As in :class:`ViLAMPCompressor`.
    max_tokens : int or None, default=None
        Length of the ``"tokens"`` output; None takes ``n_tokens_max_``.
    dim, n_frames, n_patches : int or None, default=None
        The layout of rows without a layout header, as in
        :class:`ViLAMPCompressor`.
    random_state : int, RandomState instance or None, default=0
        Seeds KMeans; the official code fixes 0.

    Attributes
    ----------
    layout_ : {"packed", "single_frame", "videos"}
        How ``X`` was read in fit.
    dim_, n_frames_, n_patches_ : int
        The layout.
    n_tokens_max_ : int
        Tokens of a video of ``n_frames_`` frames with ``max_keyframes``
        keyframes.
    n_features_in_ : int
        Columns of a 2-D ``X``.

    See Also
    --------
    ViLAMPCompressor : The same merge on differential keyframe selection.
    cluster_keyframes : The selection as a function.

    Examples
    --------
    >>> from skicml.datasets import make_needle_embeddings
    >>> from skicml.video import ClusterKeyframeCompressor, VideoEmbedding
    >>> data = make_needle_embeddings(4, n_frames=200, n_patches=4, dim=16, random_state=0)
    >>> videos = [VideoEmbedding(f, q, p) for f, q, p in zip(data.frames, data.queries, data.patches)]
    >>> compressor = ClusterKeyframeCompressor(max_keyframes=8, n_clusters=16).fit(videos)
    >>> [len(keys) for keys in compressor.get_selection(videos)]
    [8, 8, 8, 8]
    >>> compressor.transform(videos).shape
    (4, 32)
    """

    _parameter_constraints = {
        "max_keyframes": [Interval(Integral, 1, None, closed="left")],
        "n_clusters": [Interval(Integral, 1, None, closed="left"), None],
        "merge_lambda": [Real],
        "merge_temperature": [Interval(Real, 0, None, closed="neither")],
        "reference": [StrOptions({"preceding", "nearest", "official"})],
        "keyframe_pool": [Interval(Integral, 1, None, closed="left")],
        "output": [StrOptions({"pooled", "tokens", "selection"})],
        "max_tokens": [Interval(Integral, 1, None, closed="left"), None],
        "dim": [Interval(Integral, 1, None, closed="left"), None],
        "n_frames": [Interval(Integral, 1, None, closed="left"), None],
        "n_patches": [Interval(Integral, 0, None, closed="left"), None],
        "random_state": ["random_state"],
    }

    def __init__(self, max_keyframes=32, n_clusters=64, merge_lambda=1.0, merge_temperature=0.01,
                 reference="preceding", keyframe_pool=1, output="pooled", max_tokens=None, dim=None, n_frames=None,
                 n_patches=None, random_state=0):
        self.max_keyframes = max_keyframes
        self.n_clusters = n_clusters
        self.merge_lambda = merge_lambda
        self.merge_temperature = merge_temperature
        self.reference = reference
        self.keyframe_pool = keyframe_pool
        self.output = output
        self.max_tokens = max_tokens
        self.dim = dim
        self.n_frames = n_frames
        self.n_patches = n_patches
        self.random_state = random_state

    def _select(self, videos):
        return [torch.from_numpy(cluster_keyframes(v.frames, v.query, self.max_keyframes, self.n_clusters,
                                                   self.random_state)) for v in videos]
