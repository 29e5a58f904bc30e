"""``ViLAMPCompressor``: videos and a query to a short token sequence, training-free."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ...utils.param_validation import Integral, Interval, StrOptions, fit_context
from ._functional import merge_features
from ._input import COMPRESSION_CONSTRAINTS, COMPRESSION_DOC, VideoInputMixin, query_matrix

__all__ = ["ViLAMPCompressor"]


class _TokenCompressor(VideoInputMixin, TransformerMixin, BaseEstimator):
    """What the training-free compressors share: the layout, the merge and the outputs.

    A subclass declares its parameters and chooses the keyframes
    (``_select``); the merge, the outputs and the layout are these.
    """

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Read the layout of ``X``; nothing is learned.

        Parameters
        ----------
        X : ndarray of shape (n_videos, width) or list of VideoEmbedding
        y : None
            Ignored.

        Returns
        -------
        self
        """
        self._read_videos(X, reset=True)
        patches = max(self.n_patches_, 1)
        if self.keyframe_pool > 1 and int(round(patches ** 0.5)) ** 2 != patches:
            raise ValueError(f"keyframe_pool={self.keyframe_pool} needs a square patch grid, but the "
                             f"videos have {self.n_patches_} patches per frame.")
        keyframes = min(self.max_keyframes, self.n_frames_)
        self.n_tokens_max_ = keyframes * self._tokens_per_keyframe() + self.n_frames_ - keyframes
        return self

    def transform_tokens(self, X):
        """The compressed token sequence of each video.

        Parameters
        ----------
        X : ndarray of shape (n_videos, width) or list of VideoEmbedding

        Returns
        -------
        tokens : list of torch.Tensor of shape (n_tokens_i, dim)
        token_types : list of torch.LongTensor of shape (n_tokens_i,)
            1 for a keyframe's patch, 0 for a merged frame.
        """
        return self._compress(X)[:2]

    def get_selection(self, X):
        """The keyframe indices of each video (sorted int arrays)."""
        check_is_fitted(self)
        return [k.numpy() for k in self._select(self._read_videos(X, reset=False))]

    def get_token_types(self, X):
        """The token types of each video (1: keyframe patch, 0: merged frame)."""
        return [t.numpy() for t in self._compress(X)[1]]

    def _compress(self, X):
        check_is_fitted(self)
        videos = self._read_videos(X, reset=False)
        keyframes = self._select(videos)
        patches = [torch.from_numpy(np.ascontiguousarray(v.patch_array())) for v in videos]
        queries = query_matrix(videos, patches[0].dtype)
        with torch.inference_mode():
            tokens, types = merge_features(patches, queries, keyframes, merge_lambda=self.merge_lambda,
                                           temperature=self.merge_temperature, reference=self.reference,
                                           keyframe_pool=self.keyframe_pool)
        return tokens, types, keyframes

    def transform(self, X):
        """Compress each video.

        Parameters
        ----------
        X : ndarray of shape (n_videos, width) or list of VideoEmbedding

        Returns
        -------
        ndarray of shape (n_videos, n_outputs)
            ``2 * dim_`` values per video for ``output="pooled"``,
            ``max_tokens * dim_`` for ``"tokens"``, ``n_frames_`` for
            ``"selection"``; float64 for float64 input, else float32.
        """
        check_is_fitted(self)
        if self.output == "selection":
            keyframes = self.get_selection(X)
            mask = np.zeros((len(keyframes), self.n_frames_), dtype=np.float32)
            for row, key in zip(mask, keyframes):
                row[key[key < self.n_frames_]] = 1
            return mask
        tokens, types, _ = self._compress(X)
        dtype = np.float64 if tokens[0].dtype == torch.float64 else np.float32
        if self.output == "pooled":
            out = np.zeros((len(tokens), 2 * self.dim_), dtype=dtype)
            for row, sequence, kind in zip(out, tokens, types):
                for half, keep in ((0, kind == 1), (1, kind == 0)):
                    if keep.any():
                        row[half * self.dim_:(half + 1) * self.dim_] = sequence[keep].mean(0).numpy()
            return out
        length = self.max_tokens or self.n_tokens_max_
        out = np.zeros((len(tokens), length, self.dim_), dtype=dtype)
        for row, sequence in zip(out, tokens):
            kept = sequence[:length].numpy()
            row[:len(kept)] = kept
        return out.reshape(len(tokens), -1)

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns.

        Returns
        -------
        ndarray of str
        """
        check_is_fitted(self)
        if self.output == "pooled":
            names = [f"keyframes{d}" for d in range(self.dim_)] + [f"merged{d}" for d in range(self.dim_)]
        elif self.output == "selection":
            names = [f"frame{n}" for n in range(self.n_frames_)]
        else:
            names = [f"token{t}_{d}" for t in range(self.max_tokens or self.n_tokens_max_)
                     for d in range(self.dim_)]
        return np.asarray(names, dtype=object)


class ViLAMPCompressor(_TokenCompressor):
    __doc__ = """Compress long videos for a query: differential keyframe selection and feature merging.

    ViLAMP (Cheng et al., ICML 2025) keeps what a question needs of a long
    video in few tokens: the frames most relevant to the query that are not
    near-duplicates of each other become keyframes and keep all their
    patches; every other frame becomes one token, its patches weighted by
    relevance to the query minus similarity to the same patch of its
    reference keyframe. ``n_frames * n_patches`` tokens become
    ``K * n_patches + n_frames - K``. Training-free: frames, patches and query
    must share one embedding space (a CLIP model's, see
    :class:`CLIPVideoEncoder`); ``fit`` only reads the layout.

    Parameters
    ----------
""" + COMPRESSION_DOC + """    output : {"pooled", "tokens", "selection"}, default="pooled"
        What :meth:`transform` returns: ``"pooled"`` the mean of the keyframe
        tokens beside the mean of the merged tokens (2 * dim values);
        ``"tokens"`` the token sequence, zero-padded to ``max_tokens``
        (``n_tokens * dim`` values); ``"selection"`` a 0/1 keyframe mask
        over the frames.
    max_tokens : int or None, default=None
        Length of the ``"tokens"`` output; None takes ``n_tokens_max_``.
        Longer sequences are cut at their end.

    Attributes
    ----------
    layout_ : {"packed", "single_frame", "videos"}
        How ``X`` was read in fit.
    dim_, n_frames_, n_patches_ : int
        The layout (``n_frames_`` the longest video for a list input).
    n_tokens_max_ : int
        Tokens of a video of ``n_frames_`` frames.
    n_features_in_ : int
        Columns of a 2-D ``X``.

    See Also
    --------
    ViLAMPClassifier : A trainable head on the compressed tokens.
    ClusterKeyframeCompressor : The official KMeans keyframe baseline on the same merge.
    select_keyframes, merge_features : The two steps as functions.

    Examples
    --------
    >>> from skicml.datasets import make_needle_embeddings
    >>> from skicml.video import ViLAMPCompressor, VideoEmbedding
    >>> data = make_needle_embeddings(4, n_frames=200, n_patches=4, dim=16, random_state=0)
    >>> videos = [VideoEmbedding(f, q, p) for f, q, p in zip(data.frames, data.queries, data.patches)]
    >>> compressor = ViLAMPCompressor(max_keyframes=8).fit(videos)
    >>> compressor.n_tokens_max_
    224
    >>> compressor.transform(videos).shape
    (4, 32)
    """

    _parameter_constraints = {
        **COMPRESSION_CONSTRAINTS,
        "output": [StrOptions({"pooled", "tokens", "selection"})],
        "max_tokens": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(self, max_keyframes=32, redundancy_threshold=0.85, min_relevance=None, fill="none",
                 selector="differential", merge_lambda=1.0, merge_temperature=0.01, reference="preceding",
                 keyframe_pool=1, output="pooled", max_tokens=None, dim=None, n_frames=None, n_patches=None):
        self.max_keyframes = max_keyframes
        self.redundancy_threshold = redundancy_threshold
        self.min_relevance = min_relevance
        self.fill = fill
        self.selector = selector
        self.merge_lambda = merge_lambda
        self.merge_temperature = merge_temperature
        self.reference = reference
        self.keyframe_pool = keyframe_pool
        self.output = output
        self.max_tokens = max_tokens
        self.dim = dim
        self.n_frames = n_frames
        self.n_patches = n_patches
