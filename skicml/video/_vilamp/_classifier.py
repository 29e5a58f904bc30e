"""``ViLAMPClassifier``: a small trainable head on ViLAMP's compressed tokens."""

from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ...base import LogitsClassifierMixin, TorchEstimatorMixin, seeded
from ...utils.param_validation import Integral, Interval, StrOptions, fit_context, shared_constraints
from ...utils.validation import check_no_missing_labels
from ._input import COMPRESSION_CONSTRAINTS, COMPRESSION_DOC, VideoInputMixin
from ._layout import HEADER_WIDTH, layout_sections, pack_videos
from ._model import DifferentialFeatureMerger, ViLAMPNetwork

__all__ = ["ViLAMPClassifier"]


class _PackedVideos(torch.nn.Module):
    """Adapts :class:`ViLAMPNetwork` to batches of packed rows, for the shared training loop."""

    def __init__(self, network, dim, n_frames, n_patches):
        super().__init__()
        self.network = network
        self.layout = (dim, n_frames, n_patches)

    def forward(self, rows, keyframes):
        dim, n_frames, n_patches = self.layout
        query, frames, patch_columns = layout_sections(dim, n_frames)
        lengths = rows[:, HEADER_WIDTH].long().tolist()
        queries = rows[:, query]
        if n_patches:
            patches = rows[:, patch_columns].unflatten(1, (n_frames, n_patches, dim))
        else:
            patches = rows[:, frames].unflatten(1, (n_frames, 1, dim))
        videos = [patches[i, :length] for i, length in enumerate(lengths)]
        keys = [keyframes[i, :length].nonzero().flatten() for i, length in enumerate(lengths)]
        return self.network(videos, queries, keys)


class ViLAMPClassifier(VideoInputMixin, LogitsClassifierMixin, TorchEstimatorMixin, ClassifierMixin, BaseEstimator):
    __doc__ = """Classify long videos from ViLAMP's compressed tokens, trained end to end.

    Keyframes are chosen once per video (:func:`skicml.video.select_keyframes`,
    or evenly spaced with ``selector="uniform"``); every other frame is merged
    into one token, by the parameter-free rule or, with ``learnable_merge``,
    by the official ``SigPooling`` maps, which then train with the head; a
    small head (a stand-in for the paper's LLM) reads the query and the
    tokens. Trained through skicml's shared loop (skorch).

    Parameters
    ----------
""" + COMPRESSION_DOC + """    learnable_merge : bool, default=False
        Learn the merge's four linear maps and temperature with the head
        (the official ``SigPooling``), for patches that do not share the
        query's space. With embeddings from one CLIP model the parameter-free
        merge needs no data; the learned one overfits small training sets
        (doc/performance.rst). With patches rotated away from the query's
        space, where the parameter-free merge fails (0.33 accuracy against
        0.99), it beat it on one seed of three from 120 training videos
        (0.42 on average, 0.52 from an initial ``merge_temperature`` of 1;
        doc/video.rst, ``vilamp-pixels``).
    merge_init : {"normal", "identity"}, default="normal"
        Initial maps of the learnable merge: the official N(0, 0.02), or
        the identity plus N(0, 0.02) (zero bias), which starts from the
        parameter-free rule. Ignored unless ``learnable_merge``. On patches
        rotated away from the query's space the identity start did not help
        (0.43 against 0.52 from the official start, 3 seeds; doc/video.rst,
        ``vilamp-pixels``).
    head : {"attention_pool", "transformer"}, default="attention_pool"
        The head over the tokens (see :class:`ViLAMPNetwork`): a pooling of
        the tokens by attention to the query, or a transformer over
        ``[CLS, query, tokens]``, which needs more videos to generalise.
    d_model : int, default=64
    n_layers : int, default=2
        Blocks of the transformer head.
    n_heads : int, default=4
    max_epochs : int, default=40
    batch_size : int, default=8
    lr : float, default=1e-2
    weight_decay : float, default=0.0
    validation_fraction : float or None, default=None
    n_iter_no_change : int or None, default=None
    device : str or torch.device, default="auto"
    random_state : int, RandomState instance or None, default=None
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    module_ : ViLAMPNetwork
        The trained network, in eval mode.
    history_ : dict
        ``train_loss`` (and ``valid_loss``) per epoch.
    layout_, dim_, n_frames_, n_patches_
        As in :class:`ViLAMPCompressor`.
    n_features_in_ : int
        Columns of a 2-D ``X``.

    See Also
    --------
    ViLAMPCompressor : The training-free compressor.

    Examples
    --------
    >>> from skicml.datasets import make_needle_embeddings
    >>> from skicml.video import ViLAMPClassifier, VideoEmbedding
    >>> data = make_needle_embeddings(16, n_frames=60, n_patches=4, dim=8, n_classes=2, random_state=0)
    >>> videos = [VideoEmbedding(f, q, p) for f, q, p in zip(data.frames, data.queries, data.patches)]
    >>> model = ViLAMPClassifier(max_keyframes=4, d_model=16, n_layers=1, max_epochs=2, random_state=0)
    >>> model.fit(videos, data.target).predict(videos).shape
    (16,)
    """

    _parameter_constraints = {
        **COMPRESSION_CONSTRAINTS,
        "learnable_merge": ["boolean"],
        "merge_init": [StrOptions({"normal", "identity"})],
        "head": [StrOptions({"transformer", "attention_pool"})],
        "d_model": [Interval(Integral, 1, None, closed="left")],
        "n_layers": [Interval(Integral, 1, None, closed="left")],
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        **shared_constraints("max_epochs", "batch_size", "lr", "weight_decay", "validation_fraction",
                             "n_iter_no_change", "device", "random_state", "verbose"),
    }

    def __init__(self, max_keyframes=32, redundancy_threshold=0.85, min_relevance=None, fill="none",
                 selector="differential", merge_lambda=1.0, merge_temperature=0.01, reference="preceding",
                 keyframe_pool=1, dim=None, n_frames=None, n_patches=None, learnable_merge=False,
                 merge_init="normal", head="attention_pool", d_model=64, n_layers=2, n_heads=4, max_epochs=40, batch_size=8, lr=1e-2,
                 weight_decay=0.0, validation_fraction=None, n_iter_no_change=None, device="auto",
                 random_state=None, verbose="auto"):
        self.max_keyframes = max_keyframes
        self.redundancy_threshold = redundancy_threshold
        self.min_relevance = min_relevance
        self.fill = fill
        self.selector = selector
        self.merge_lambda = merge_lambda
        self.merge_temperature = merge_temperature
        self.reference = reference
        self.keyframe_pool = keyframe_pool
        self.dim = dim
        self.n_frames = n_frames
        self.n_patches = n_patches
        self.learnable_merge = learnable_merge
        self.merge_init = merge_init
        self.head = head
        self.d_model = d_model
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _inputs(self, X, reset):
        """Packed rows (a float tensor) and keyframe masks of ``X``, for the network."""
        videos = self._read_videos(X, reset=reset)
        n_frames = max(self.n_frames_, max(v.n_frames for v in videos))
        wide = np.asarray(videos[0].frames).dtype == np.float64
        rows = pack_videos(videos, n_frames=n_frames, n_patches=self.n_patches_,
                           dtype=np.float64 if wide else np.float32)
        mask = torch.zeros(len(videos), n_frames, dtype=torch.bool)
        for row, key in zip(mask, self._select(videos)):
            row[key] = True
        return {"rows": torch.from_numpy(rows), "keyframes": mask}, n_frames

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Train the merge and the head on videos ``X`` and labels ``y``.

        Parameters
        ----------
        X : ndarray of shape (n_videos, width) or list of VideoEmbedding
        y : array-like of shape (n_videos,)

        Returns
        -------
        self
        """
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        inputs, n_frames = self._inputs(X, reset=True)
        y = column_or_1d(y, warn=True)
        if len(y) != len(inputs["rows"]):
            raise ValueError(f"X has {len(inputs['rows'])} videos but y has {len(y)} labels.")
        check_no_missing_labels(y)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        targets = torch.as_tensor(encoder.transform(y).astype(np.int64))
        self._check_validation_split(targets.numpy())
        seed = self._seed()
        dtype = inputs["rows"].dtype
        with seeded(seed):
            merger = DifferentialFeatureMerger(self.dim_, learnable=self.learnable_merge,
                                               merge_lambda=self.merge_lambda,
                                               temperature=self.merge_temperature, reference=self.reference,
                                               keyframe_pool=self.keyframe_pool, init=self.merge_init)
            network = ViLAMPNetwork(self.dim_, len(self.classes_), merger, head=self.head,
                                    d_model=self.d_model, n_layers=self.n_layers, n_heads=self.n_heads)
            module = _PackedVideos(network, self.dim_, n_frames, self.n_patches_).to(dtype)
        module, history = self._fit_module(module, inputs, targets, loss="cross_entropy", grad_clip=1.0,
                                           stratify=self.validation_fraction is not None, seed=seed)
        self.module_ = module.network.eval()
        self.history_ = {"train_loss": list(history.train_loss), "valid_loss": list(history.valid_loss)}
        return self

    def _check_validation_split(self, targets):
        """Refuse a ``validation_fraction`` whose stratified split cannot hold every class on both sides."""
        if not self.validation_fraction:
            return
        n = len(targets)
        n_valid = math.ceil(n * self.validation_fraction)
        counts = np.bincount(targets)
        if n_valid < len(counts) or n - n_valid < len(counts) or counts.min() < 2:
            raise ValueError(
                f"validation_fraction={self.validation_fraction} of {n} videos holds out {n_valid} and trains on "
                f"{n - n_valid}, but the stratified split needs each of the {len(counts)} classes on both sides "
                f"(at least {len(counts)} videos each, and two videos of every class; the rarest has "
                f"{counts.min()}). Choose a validation_fraction between {len(counts) / n:.3g} and "
                f"{1 - len(counts) / n:.3g}, or None."
            )

    def _class_logits(self, X):
        check_is_fitted(self)
        inputs, n_frames = self._inputs(X, reset=False)
        device = self._device()
        network = self.module_.to(device).eval()
        module = _PackedVideos(network, self.dim_, n_frames, self.n_patches_)
        dtype = next(network.parameters()).dtype
        inputs["rows"] = inputs["rows"].to(dtype)
        out = []
        with torch.inference_mode():
            for start in range(0, len(inputs["rows"]), self.batch_size):
                batch = {k: v[start:start + self.batch_size].to(device) for k, v in inputs.items()}
                out.append(module(**batch).double().cpu())
        return torch.cat(out).numpy()
