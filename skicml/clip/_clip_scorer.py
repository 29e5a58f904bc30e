"""``WhitenedCLIPScorer``: whitened CLIP likelihoods of images or captions.

The estimator users reach for. It is :class:`WhitenedLikelihoodOutlierDetector`
(the whitening, the likelihood and the threshold, unchanged) with a
:class:`CLIPEmbedder` in front for raw images and captions. Precomputed
embeddings (2-D float arrays) skip the encoder entirely, so that path needs
neither open_clip nor a model.
"""

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from ..utils.images import image_input_kind
from ..utils.param_validation import StrOptions, fit_context
from ._embedder import CLIPEmbedder
from ._scorer import WhitenedLikelihoodOutlierDetector

__all__ = ["WhitenedCLIPScorer"]


class WhitenedCLIPScorer(WhitenedLikelihoodOutlierDetector):
    r"""Likelihood of images or captions by whitening their CLIP embeddings (W-CLIP).

    Betser, Levi and Gilboa (ICML 2025): CLIP embeddings of a reference set,
    once whitened, behave like independent standard-normal coordinates, so
    :math:`-\tfrac{1}{2}(k\log 2\pi + \lVert z\rVert^2)` is a training-free
    log-likelihood of a new image or caption. ``fit`` learns the mean and
    whitening matrix of the reference set's embeddings; :meth:`score_samples`
    gives log-likelihoods (higher is more typical), :meth:`transform` the
    whitened embeddings, and :meth:`decision_function` / :meth:`predict`
    (+1 inlier, -1 outlier) make it a scikit-learn outlier detector for
    atypical, corrupted, generated or out-of-domain inputs.

    ``X`` may be, in ``fit`` and every method after it:

    - **precomputed embeddings**, a 2-D float array ``(n_samples, d)``: no
      encoder is used (open_clip is not even imported), unless ``embedder``
      is given;
    - **images**: a list of PIL images, file paths or arrays, or an array of
      shape ``(n, H, W, 3)``;
    - **captions**: a list, 1-D array or Series of strings.

    Images and captions are whitened separately, as in the paper: one scorer
    per modality. A scorer fitted on images refuses captions and vice versa;
    one fitted on embeddings refuses raw inputs unless it was given the
    ``embedder`` that produced them.

    Parameters
    ----------
    embedder : CLIPEmbedder or None, default=None
        The encoder of raw inputs (cloned in ``fit``). None uses
        ``CLIPEmbedder()``, the tiny CLIP shipped with skicml, and only when
        raw inputs are given. Pass ``CLIPEmbedder(model_name="ViT-L-14-quickgelu",
        pretrained="openai", memory=...)`` (an open_clip tag, fetched once
        into the cache, or a checkpoint file) for a real CLIP and cached
        embeddings, and ``CLIPEmbedder(verbose=1)`` to see the encoding's
        progress.
    modality : {"image", "text"} or None, default=None
        How a list of strings is read: captions (``"text"``) or image paths
        (``"image"``); None reads them as captions. It overrides the
        embedder's own ``modality``, except that a scorer fitted on
        embeddings with an ``embedder`` and no ``modality`` keeps the
        embedder's.
    contamination : float in (0, 0.5] or "auto", default=0.05
        Threshold of :meth:`predict`: that quantile of the training scores,
        or, with ``"auto"``, the chi-square rule
        :math:`\lVert z\rVert^2 > \chi^2_{k,1-\alpha}`.
    alpha : float in (0, 1), default=0.025
        Tail probability of the chi-square rule.
    whitening parameters
        ``method``, ``n_components``, ``eps``, ``shrinkage``, ``ddof``,
        ``corr_threshold``, ``noise_scale``, ``normalize_input``,
        ``include_log_det``, ``include_constant`` and ``random_state``, as in
        :class:`WhiteningLikelihood`.

    Attributes
    ----------
    embedder_ : CLIPEmbedder
        The fitted encoder; absent when fitted on embeddings without one.
    input_modality_ : {"image", "text", "embedding"}
        What ``fit`` was given.
    model_fingerprint_ : str or None
        Hash of the encoder's weights (None without an encoder).
    offset_ : float
        Threshold on :meth:`score_samples`.
    fitted whitening attributes
        ``mean_``, ``eigenvalues_``, ``components_``, ``whitening_matrix_``,
        ``unwhitening_matrix_``, ``n_components_``, ``log_det_``,
        ``noise_variance_``, ``shrinkage_``, ``replaced_features_``,
        ``n_samples_fit_``, ``n_features_in_`` (the embedding width) and
        ``feature_names_in_``, as in :class:`WhiteningLikelihood`.

    See Also
    --------
    CLIPEmbedder : The encoder alone.
    WhitenedLikelihoodOutlierDetector : The same model on embeddings only.

    Examples
    --------
    On precomputed embeddings (no encoder):

    >>> import numpy as np
    >>> from skicml import WhitenedCLIPScorer
    >>> rng = np.random.default_rng(0)
    >>> reference = rng.normal(size=(500, 8)) @ rng.normal(size=(8, 8))
    >>> scorer = WhitenedCLIPScorer(contamination=0.1).fit(reference)
    >>> scorer.score_samples(reference[:3]).shape
    (3,)
    >>> scorer.predict(10 * reference[:1])
    array([-1])

    On images with an encoder (here a random tiny CLIP; the shipped one is
    the default):

    >>> from skicml.clip import CLIPEmbedder
    >>> from skicml.datasets import make_shape_scenes
    >>> images, captions, _ = make_shape_scenes(60, random_state=0)
    >>> config = {"embed_dim": 4,
    ...           "vision_cfg": {"image_size": 32, "layers": 1, "width": 16, "patch_size": 8,
    ...                          "head_width": 8},
    ...           "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 16,
    ...                        "heads": 2, "layers": 1}}
    >>> embedder = CLIPEmbedder(model_config=config, random_state=0)
    >>> scorer = WhitenedCLIPScorer(embedder=embedder).fit(images)
    >>> scorer.score_samples(images[:2]).shape
    (2,)
    """

    _parameter_constraints = {
        **WhitenedLikelihoodOutlierDetector._parameter_constraints,
        "embedder": [CLIPEmbedder, None],
        "modality": [StrOptions({"image", "text"}), None],
    }

    def __init__(
        self,
        embedder=None,
        modality=None,
        contamination=0.05,
        alpha=0.025,
        method="pca",
        n_components=None,
        eps=1e-12,
        shrinkage=None,
        ddof=1,
        corr_threshold=None,
        noise_scale=0.1,
        normalize_input=False,
        include_log_det=False,
        include_constant=True,
        random_state=None,
    ):
        super().__init__(
            contamination=contamination,
            alpha=alpha,
            method=method,
            n_components=n_components,
            eps=eps,
            shrinkage=shrinkage,
            ddof=ddof,
            corr_threshold=corr_threshold,
            noise_scale=noise_scale,
            normalize_input=normalize_input,
            include_log_det=include_log_det,
            include_constant=include_constant,
            random_state=random_state,
        )
        self.embedder = embedder
        self.modality = modality

    # ------------------------------------------------------------------
    # the encoder in front of the whitening
    # ------------------------------------------------------------------
    def _raw_modality(self, kind):
        """The modality raw input of this kind is read as."""
        if kind == "image":
            if self.modality == "text":
                raise ValueError("modality='text', but X holds images.")
            return "image"
        return self.modality or "text"

    def _embeddings_for_fit(self, X):
        """Fit the encoder if needed; return what the whitening is fitted on."""
        for stale in ("embedder_",):
            if hasattr(self, stale):
                delattr(self, stale)
        kind = image_input_kind(X)
        if kind == "embedding":
            self.input_modality_ = "embedding"
            if self.embedder is None:
                self.model_fingerprint_ = None
                return X
            modality = self.modality or self.embedder.modality
            self.embedder_ = clone(self.embedder).set_params(modality=modality).fit()
            self.model_fingerprint_ = self.embedder_.model_fingerprint_
            return X
        modality = self._raw_modality(kind)
        embedder = self.embedder if self.embedder is not None else CLIPEmbedder()
        self.embedder_ = clone(embedder).set_params(modality=modality).fit()
        self.model_fingerprint_ = self.embedder_.model_fingerprint_
        self.input_modality_ = modality
        return self.embedder_.transform(X)

    def _embed(self, X):
        kind = image_input_kind(X)
        if kind == "embedding":
            return X
        embedder = getattr(self, "embedder_", None)
        if embedder is None:
            # Name the array's shape: a 3-D float array is as likely a mistake
            # with embeddings as a batch of grey images.
            what = (f"images (X is a {np.ndim(X)}-D array of shape {np.shape(X)}, read as a batch of images)"
                    if kind == "image" and hasattr(X, "shape") else "images" if kind == "image" else "strings")
            raise ValueError(
                "this scorer was fitted on precomputed embeddings (2-D arrays) without an encoder, so it "
                f"cannot read {what}: pass embeddings of the same encoder, or fit with "
                "embedder=CLIPEmbedder(...) (or on the raw inputs)."
            )
        if kind == "image" and embedder.modality == "text":
            raise ValueError(
                "this scorer whitens caption (text) embeddings, but X holds images; images and "
                "captions are whitened separately, so fit a second scorer on images."
            )
        if kind == "strings" and self.modality == "image" and embedder.modality == "text":
            raise ValueError("modality='image', but this scorer was fitted on captions.")
        return embedder.transform(X)

    def _validate(self, X, reset):
        if not reset:
            check_is_fitted(self)
            X = self._embed(X)
        return super()._validate(X, reset)

    # ------------------------------------------------------------------
    # fitting (scoring goes through _validate)
    # ------------------------------------------------------------------
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the whitening (and the threshold) on reference images, captions or embeddings.

        Parameters
        ----------
        X : images, captions, or array-like of shape (n_samples, d)
            The reference (in-distribution) set, at least two samples; more
            than ``d`` (the embedding width) for a full-rank whitening.
        y : None
            Ignored.

        Returns
        -------
        self : WhitenedCLIPScorer
        """
        super().fit(self._embeddings_for_fit(X))
        self._check_embed_dim()
        return self

    @fit_context(prefer_skip_nested_validation=True)
    def fit_predict(self, X, y=None):
        """Fit on ``X`` and label it (+1 inlier, -1 outlier), encoding ``X`` once.

        Parameters
        ----------
        X : images, captions, or array-like of shape (n_samples, d)
        y : None
            Ignored.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        Z = self._embeddings_for_fit(X)
        super().fit(Z)
        self._check_embed_dim()
        return self.predict(Z)

    def _check_embed_dim(self):
        embedder = getattr(self, "embedder_", None)
        if embedder is not None and embedder.embed_dim_ != self.n_features_in_:
            raise ValueError(
                f"X has {self.n_features_in_} features, but the embedder gives {embedder.embed_dim_}-d "
                "embeddings: the embeddings were not made by this embedder."
            )

    @classmethod
    def from_precomputed(cls, mean, whitening_matrix, X_reference=None, **params):
        """A fitted scorer from a published mean and whitening matrix.

        As :meth:`WhitenedLikelihoodOutlierDetector.from_precomputed`; with
        an ``embedder=`` in ``params`` (for instance OpenAI's ViT-L/14 with
        the paper's ``w_mats``), the encoder is fitted too, so the scorer
        reads images or captions.

        Parameters
        ----------
        mean : array-like or torch.Tensor of shape (n_features,)
        whitening_matrix : array-like or torch.Tensor of shape (n_features, k)
        X_reference : array-like of shape (n_samples, n_features) or None
            Reference embeddings for a float ``contamination``.
        **params
            Constructor parameters.

        Returns
        -------
        WhitenedCLIPScorer
        """
        model = super().from_precomputed(mean, whitening_matrix, X_reference=X_reference, **params)
        model.input_modality_ = "embedding"
        model.model_fingerprint_ = None
        if model.embedder is not None:
            modality = model.modality or model.embedder.modality
            model.embedder_ = clone(model.embedder).set_params(modality=modality).fit()
            model.model_fingerprint_ = model.embedder_.model_fingerprint_
            model._check_embed_dim()
        return model
