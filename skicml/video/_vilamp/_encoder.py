"""``CLIPVideoEncoder``: frames and a question to the embeddings ViLAMP compresses."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted, validate_data

from ...base import as_skicml_tags
from ...utils.images import out_of_range_row_checks
from ...utils.param_validation import HasMethods, Integral, Interval, fit_context
from .._frames import check_video_frames
from ._layout import VideoEmbedding, pack_videos

__all__ = ["CLIPVideoEncoder"]


def _default_embedder():
    # video -> clip is a declared edge of the map (tests/test_layers.py's
    # FAMILY_EDGES), imported here rather than at the top so that importing
    # the video family does not load the clip family until a default
    # embedder is needed.
    from ...clip import CLIPEmbedder

    return CLIPEmbedder()


def _is_pair(item):
    """Whether ``item`` is meant as a (frames, question) pair rather than a row of numbers."""
    return isinstance(item, (tuple, list)) and any(
        isinstance(part, str) or (isinstance(part, (np.ndarray, list, tuple)) and np.ndim(part) >= 1)
        for part in item)


def _is_question(part):
    """A question: a string, or a non-empty list or tuple of strings (a prompt ensemble)."""
    return isinstance(part, str) or (isinstance(part, (list, tuple)) and len(part) > 0
                                     and all(isinstance(text, str) for text in part))


def _prompts(question):
    return [question] if isinstance(question, str) else list(question)


class CLIPVideoEncoder(TransformerMixin, BaseEstimator):
    """Embed videos' frames, patches and questions with one CLIP model.

    Each frame gives its image embedding and its projected patch tokens
    (``CLIPEmbedder.transform_patches``), the question its text embedding,
    all in CLIP's joint space, so that :class:`ViLAMPCompressor` compares them
    by cosine without training. The output is the packed layout of
    :func:`pack_videos`, one row per video with its layout header, so the
    encoder is the first step of a ``Pipeline`` whose compressor reads the
    rows with no argument (``make_pipeline(CLIPVideoEncoder(),
    ViLAMPCompressor())``); :meth:`transform_videos` gives
    :class:`VideoEmbedding` records instead.

    A question is a string, or a list of strings (a prompt ensemble) whose
    text embeddings are averaged into one query: a small CLIP trained on
    captions of one form (the shipped tiny CLIP knows "a small red
    circle", not "a red object") finds the frames that answer a question
    far better through the captions that spell it out
    (``make_needle_videos(...).query_prompts``).

    Parameters
    ----------
    embedder : CLIPEmbedder or None, default=None
        The CLIP model (any :class:`skicml.clip.CLIPEmbedder`, e.g. one with
        an open_clip tag such as ``CLIPEmbedder(model_name="ViT-B-32",
        pretrained="laion2b_s34b_b79k")``, fetched once into the cache, or a
        local checkpoint); cloned for frames and for questions. None uses
        the tiny CLIP shipped with skicml.
    max_frames : int or None, default=None
        Videos longer than this are subsampled to this many evenly spaced
        frames (the official code keeps at most 600 at 1 fps).
    n_frames : int or None, default=None
        Frames per packed row; None takes the longest video seen in fit.
        Longer videos at transform time are subsampled to it.
    patches : bool, default=True
        Include the patch tokens; False packs frame embeddings only (each
        frame then merges as its own single patch).

    Attributes
    ----------
    image_embedder_, text_embedder_ : CLIPEmbedder
        The fitted clones.
    dim_, n_frames_, n_patches_ : int
        The packed layout of the output, also written in each row's header.
    n_features_in_ : int
        Columns of a 2-D ``X`` (rows of flattened single frames).

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.video import CLIPVideoEncoder
    >>> video = np.zeros((6, 32, 32, 3), dtype=np.uint8)
    >>> encoder = CLIPVideoEncoder().fit([(video, "a red circle")])
    >>> encoder.transform([(video, "a red circle")]).shape[0]
    1
    >>> ensemble = [(video, ["a small red circle", "a large red circle"])]
    >>> encoder.transform_videos(ensemble)[0].query.shape
    (32,)
    """

    _parameter_constraints = {
        "embedder": [HasMethods(["fit", "transform", "transform_patches"]), None],
        "max_frames": [Interval(Integral, 1, None, closed="left"), None],
        "n_frames": [Interval(Integral, 1, None, closed="left"), None],
        "patches": ["boolean"],
    }

    def __init__(self, embedder=None, max_frames=None, n_frames=None, patches=True):
        self.embedder = embedder
        self.max_frames = max_frames
        self.n_frames = n_frames
        self.patches = patches

    def _pairs(self, X, reset):
        """``[(frames, query)]`` from a list of pairs, or single-frame videos from 2-D rows."""
        if isinstance(X, (list, tuple)):
            if not X:
                raise ValueError("X holds no videos: pass a list of (frames, question) pairs (or a 2-D array of "
                                 "flattened frames), at least one.")
            if len(X) == 2 and _is_question(X[1]) and not isinstance(X[0], str):
                raise ValueError("X is one (frames, question) pair; pass a list of pairs, [(frames, question)], "
                                 "even for one video.")
        if isinstance(X, (list, tuple)) and _is_pair(X[0]):
            pairs = []
            for i, item in enumerate(X):
                if not isinstance(item, (tuple, list)) or len(item) != 2 or not _is_question(item[1]):
                    raise ValueError(f"X[{i}] must be a (frames, question) pair with the question a string "
                                     "(or a non-empty list of strings, a prompt ensemble).")
                frames = check_video_frames(item[0], f"X[{i}][0]")
                if self.max_frames is not None and len(frames) > self.max_frames:
                    keep = np.round(np.linspace(0, len(frames) - 1, self.max_frames)).astype(int)
                    frames = frames[keep]
                if any(not text.strip() for text in _prompts(item[1])):
                    raise ValueError(f"X[{i}] has an empty question.")
                pairs.append((frames, item[1]))
            if reset and hasattr(self, "n_features_in_"):
                del self.n_features_in_
            return pairs
        X = validate_data(self, X, reset=reset, ensure_all_finite=True)
        # The 2-D path: each row is one flattened frame (read as CLIPEmbedder
        # reads rows), a video of one frame with no question.
        return [(row[None], "") for row in X]

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Load the CLIP model and fix the packed layout.

        Parameters
        ----------
        X : list of (frames, question) pairs, or 2-D array
            Pairs as tuples or lists, ``frames`` a (n_frames, height, width,
            3) uint8 array (or floats in [0, 1]); a 2-D array holds one
            flattened frame per row (uint8 pixels, or floats in [0, 1]).
        y : None
            Ignored.

        Returns
        -------
        self
        """
        pairs = self._pairs(X, reset=True)
        embedder = _default_embedder() if self.embedder is None else self.embedder
        # Fitted on the rows of the 2-D path, so that it reads their layout.
        self.image_embedder_ = clone(embedder).set_params(modality="image").fit(
            X if isinstance(X, np.ndarray) else None)
        self.text_embedder_ = clone(embedder).set_params(modality="text").fit()
        self.dim_ = int(self.image_embedder_.embed_dim_)
        longest = max(len(frames) for frames, _ in pairs)
        self.n_frames_ = self.n_frames or longest
        probe = pairs[0][0][:1]
        self.n_patches_ = int(self.image_embedder_.transform_patches(probe)[1].shape[1]) if self.patches else 0
        return self

    def transform_videos(self, X):
        """The embeddings of each video as :class:`VideoEmbedding` records.

        Parameters
        ----------
        X : list of (frames, question) pairs, or 2-D array

        Returns
        -------
        list of VideoEmbedding
        """
        check_is_fitted(self)
        pairs = self._pairs(X, reset=False)
        prompts = [_prompts(question) for _, question in pairs]
        flat = self.text_embedder_.transform([text for texts in prompts for text in texts])
        ends = np.cumsum([len(texts) for texts in prompts])
        # A prompt ensemble is the mean of its captions' embeddings.
        queries = [flat[end - len(texts):end].mean(0) for texts, end in zip(prompts, ends)]
        videos = []
        for (frames, _), query in zip(pairs, queries):
            if len(frames) > self.n_frames_:
                frames = frames[np.round(np.linspace(0, len(frames) - 1, self.n_frames_)).astype(int)]
            if self.patches:
                embedding, patches = self.image_embedder_.transform_patches(frames)
            else:
                embedding, patches = self.image_embedder_.transform(frames), None
            videos.append(VideoEmbedding(frames=embedding, query=query, patches=patches))
        return videos

    def transform(self, X):
        """Embed and pack each video.

        Parameters
        ----------
        X : list of (frames, question) pairs, or 2-D array

        Returns
        -------
        ndarray of shape (n_videos, 1 + dim + n_frames * dim * (1 + n_patches))
            The layout of ``dim_``, ``n_frames_`` and ``n_patches_``.
        """
        return pack_videos(self.transform_videos(X), n_frames=self.n_frames_, n_patches=self.n_patches_)

    def __sklearn_tags__(self):
        tags = as_skicml_tags(super().__sklearn_tags__())
        tags.requires_fit = True
        # The embeddings' dtype is the CLIP model's, whatever the input's.
        tags.transformer_tags.preserves_dtype = []
        tags.expected_failed_checks = {**tags.expected_failed_checks, **out_of_range_row_checks()}
        return tags
