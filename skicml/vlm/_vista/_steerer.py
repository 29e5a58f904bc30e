"""``VisualSteeringVector`` and ``VISTASteerer``: VISTA (Li et al., ICML 2025) as estimators."""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ...base import TorchEstimatorMixin, seed_from_random_state, warn_user
from ...utils.images import out_of_range_row_checks
from ...utils.param_validation import Integral, Interval, Real, StrOptions, fit_context, shared_constraints
from .._chair import chair, chair_mentions
from .._generate import generate
from .._input import _VLMInputMixin
from .._text import DEFAULT_PROMPT
from ._steering import capture_last_states, logit_lens_ranks, steering_vectors, vista

__all__ = ["VISTASteerer", "VisualSteeringVector"]

#: Share of collapsed captions (empty, or run on to the token limit in a loop) above which
#: ``predict`` warns that steering is too strong.
COLLAPSE_WARNING = 0.2
#: A run-on caption loops when an n-gram of up to this many tokens repeats three times in a row.
_LOOP_NGRAM = 4

_SCORINGS = {"chair_i": -1.0, "chair_s": -1.0, "recall": 1.0, "precision": 1.0, "f1": 1.0}


class _SteeringInputMixin(_VLMInputMixin):
    """The shared input handling plus the batched steering vectors of both VISTA estimators."""

    def _differences(self, images, prompts, layers):
        """Steering vectors (n, len(layers), d) of all of ``images``, batch by batch, float32."""
        with torch.inference_mode():
            parts = [steering_vectors(self.backbone_, batch, these, layers).cpu().numpy()
                     for batch, these in self._batches(images, prompts)]
        return np.concatenate(parts).astype(np.float32)


def _loops(ids):
    """Whether some n-gram (n <= _LOOP_NGRAM) of ``ids`` repeats three times back to back."""
    for n in range(1, _LOOP_NGRAM + 1):
        for start in range(len(ids) - 3 * n + 1):
            if ids[start:start + n] == ids[start + n:start + 2 * n] == ids[start + 2 * n:start + 3 * n]:
                return True
    return False


def _traced(logits_fn, record):
    def traced(hidden):
        record()
        return logits_fn(hidden)

    return traced


def _fitted_vector(differences):
    """ICV's amortised vector of several (positive, negative) pairs: first principal axis plus mean."""
    mean = differences.mean(0)
    if len(differences) < 2:
        return mean
    _, _, vt = np.linalg.svd(differences - mean, full_matrices=False)
    axis = vt[0] if vt[0] @ mean >= 0 else -vt[0]
    return axis + mean


class VisualSteeringVector(_SteeringInputMixin, TorchEstimatorMixin, TransformerMixin, BaseEstimator):
    """VISTA's visual steering vectors of images under a prompt, one per decoder layer.

    For each image, the residual stream after every decoder layer at the
    prompt's last token, with the image in the context minus without it
    (paper Eq. 4): the direction in which seeing the image moves the model.
    The vector is computed per sample, as the paper does; ``mode="fitted"``
    instead fits one amortised vector on the pairs of ``X`` (the first
    principal axis of the differences plus their mean, as the official
    ``obtain_vsv`` does for the in-context vectors it borrows from).

    Parameters
    ----------
    backbone : str, TinyVLM, adapter or None, default=None
        A backbone of the VLM protocol (:class:`HFLlavaAdapter`,
        :class:`CallableAdapter`), a :class:`TinyVLM`, or the name or path of
        a TinyVLM file; None is the shipped ``tiny-vlm-scenes``.
    prompt : str, default="describe the image in detail :"
        The instruction, for inputs that carry none.
    layers : sequence of int or None, default=None
        Decoder layers to read; None is all of them.
    mode : {"per_sample", "fitted"}, default="per_sample"
    flatten : bool, default=True
        ``transform`` returns (n, n_layers * d); False gives (n, n_layers, d).
    image_shape : tuple of int or None, default=None
        ``(height, width[, channels])`` of the rows of a 2-D ``X``.
    batch_size : int, default=8
    device : str or torch.device, default="cpu"
        Not where the vectors are computed: VISTA reads the backbone where
        its weights are and never moves it (move the backbone to compute on
        a GPU). Kept for the same parameters as :class:`VISTASteerer`, with
        its default: "cpu" rather than "auto", the shipped tiny VLM's device.

    Attributes
    ----------
    backbone_ : object
        The resolved protocol backbone.
    n_layers_, hidden_size_ : int
    layers_ : list of int
    vector_ : ndarray of shape (n_layers, d)
        The amortised vector (``mode="fitted"``).
    n_features_in_ : int
        Only when fitted on a 2-D array.

    Examples
    --------
    >>> from skicml.datasets import make_object_scenes
    >>> from skicml.vlm import TinyVLM, VisualSteeringVector, scene_vocabulary
    >>> images, _, _ = make_object_scenes(2, random_state=0)
    >>> model = TinyVLM(scene_vocabulary(), hidden_size=32, num_layers=2, head_dim=16)
    >>> VisualSteeringVector(backbone=model, flatten=False).fit_transform(images).shape
    (2, 2, 32)
    """

    _parameter_constraints = {
        "backbone": "no_validation",
        "prompt": [str],
        "layers": ["array-like", None],
        "mode": [StrOptions({"per_sample", "fitted"})],
        "flatten": ["boolean"],
        "image_shape": [tuple, list, None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        **shared_constraints("device"),
    }

    def __init__(self, backbone=None, prompt=DEFAULT_PROMPT, layers=None, mode="per_sample", flatten=True,
                 image_shape=None, batch_size=8, device="cpu"):
        self.backbone = backbone
        self.prompt = prompt
        self.layers = layers
        self.mode = mode
        self.flatten = flatten
        self.image_shape = image_shape
        self.batch_size = batch_size
        self.device = device

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Resolve the backbone and layers; in ``"fitted"`` mode, fit the amortised vector on ``X``.

        Parameters
        ----------
        X : images, list of dicts, DataFrame or 2-D array
        y : None
            Ignored.

        Returns
        -------
        self : VisualSteeringVector
        """
        self._check_image_shape()
        self._resolve_backbone()
        self.layers_ = self._resolve_layers(self.layers, "layers")
        images, prompts = self._read(X, reset=True)
        self.vector_ = None
        if self.mode == "fitted":
            differences = self._differences(images, prompts, self.layers_)
            self.vector_ = _fitted_vector(differences.reshape(len(differences), -1)).reshape(differences.shape[1:])
        return self

    def transform(self, X):
        """The steering vectors of ``X``: per sample, or the fitted one repeated.

        Parameters
        ----------
        X : images, list of dicts, DataFrame or 2-D array

        Returns
        -------
        ndarray of shape (n_samples, n_layers * d) or (n_samples, n_layers, d), float32
        """
        check_is_fitted(self, "backbone_")
        images, prompts = self._read(X, reset=False)
        if self.mode == "fitted":
            vectors = np.broadcast_to(self.vector_, (len(images),) + self.vector_.shape).copy()
        else:
            vectors = self._differences(images, prompts, self.layers_)
        return vectors.reshape(len(vectors), -1) if self.flatten else vectors

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = []
        tags.expected_failed_checks = {**tags.expected_failed_checks, **out_of_range_row_checks()}
        return tags


class VISTASteerer(_SteeringInputMixin, TorchEstimatorMixin, TransformerMixin, BaseEstimator):
    """Captioning with VISTA: visual steering and self-logits augmentation (Li et al., ICML 2025).

    A vision-language model loses sight of the image as it writes: words
    that are in the picture rank lower step by step, and the layers just
    below the top rank them higher than the last one. VISTA answers both at
    decoding time, with no training:

    - **visual steering** (``vsv``): each sample's steering vector (the
      change that seeing the image makes to the prompt's last hidden state,
      per layer; :class:`VisualSteeringVector`) is added back at every
      layer and step with strength ``vsv_lambda``, at the MLP outputs (the
      official code) or the residual stream (the paper), each token's norm
      kept;
    - **self-logits augmentation** (``sla``): the logits are mixed with the
      mean logit-lens logits of a window of layers below the top:
      ``(1 - gamma) * H(h_L) + gamma * mean_l H(h_l)``, before any logits
      processing.

    It drives any backbone of the VLM protocol with forward hooks that are
    removed after every call; a batch's samples each get their own vector.

    Parameters
    ----------
    backbone : str, TinyVLM, adapter or None, default=None
        As in :class:`VisualSteeringVector`; None is the shipped ``tiny-vlm-scenes``.
    prompt : str, default="describe the image in detail :"
    vsv : bool, default=True
    vsv_lambda : float, default=0.1
        Steering strength; the paper uses 0.1 to 0.17 for captions and 0.01
        for yes/no questions, and captions collapse above a model-specific
        bound: empty, or running on to ``max_new_tokens`` in a loop of
        repeated words. ``predict`` warns when over a fifth of them do.
    vsv_layers : sequence of int or None, default=None
        Layers steered; None is all (at the ``"mlp_output"`` site, all a
        backbone's ``mlp_steering_layers``: Mllama's self-attention layers).
    vsv_site : {"mlp_output", "residual"}, default="mlp_output"
    vsv_adaptive : bool, default=True
        The official code's gain ``1 + max(0, cos(x, -v))``.
    vsv_mode : {"per_sample", "fitted"}, default="per_sample"
        ``"fitted"`` steers every sample with one vector fitted on ``X`` of ``fit``.
    sla : bool, default=True
    sla_gamma : float, default=0.3
    sla_window : int, default=5
        The ``w`` layers below the last one (the paper's window; the official
        code's default spans 6). At most the backbone's depth minus one
        (a deeper window is refused at fit).
    sla_layers : tuple of (int, int) or None, default=None
        Explicit inclusive 0-based range of layers, the official
        ``--logits-layers`` convention; overrides ``sla_window``.
    sla_final_norm : bool, default=False
        Apply the final norm to the early states before the LM head (the
        official code does not).
    decoding : {"greedy", "beam", "nucleus"}, default="greedy"
    num_beams : int, default=5
    top_p : float, default=0.9
    top_k : int, default=0
    temperature : float, default=1.0
    repetition_penalty : float, default=1.0
    max_new_tokens : int, default=80
    vocabulary : sequence of str or None, default=None
        Object names ``score`` counts; None is the classes of
        :func:`skicml.datasets.make_object_scenes`, what the shipped model describes.
    scoring : {"chair_i", "chair_s", "recall", "precision", "f1"}, default="chair_i"
        What ``score`` returns, signed so that greater is better.
    image_shape : tuple of int or None, default=None
    batch_size : int, default=8
    device : str or torch.device, default="cpu"
        The device of nucleus sampling's random generator, which must be
        the device of the backbone's weights: VISTA computes where the
        backbone is and never moves it. "cpu" rather than "auto" because
        the shipped tiny VLM loads on the CPU; pass the backbone's device
        with a backbone on a GPU.
    random_state : int, RandomState instance or None, default=None
        Seeds nucleus sampling.

    Attributes
    ----------
    backbone_ : object
    n_layers_, hidden_size_ : int
    vsv_layers_, sla_layers_ : list of int
    vector_ : ndarray of shape (n_vsv_layers, d) or None
        The fitted vector (``vsv_mode="fitted"``).
    n_features_in_ : int
        Only when fitted on a 2-D array.

    See Also
    --------
    VisualSteeringVector : The steering vectors alone.
    skicml.vlm.chair : The hallucination metric ``score`` uses.

    Examples
    --------
    >>> from skicml.datasets import make_object_scenes
    >>> from skicml.vlm import TinyVLM, VISTASteerer, scene_vocabulary
    >>> images, _, objects = make_object_scenes(2, random_state=0)
    >>> model = TinyVLM(scene_vocabulary(), hidden_size=32, num_layers=2, head_dim=16)
    >>> steerer = VISTASteerer(backbone=model, sla_window=1, max_new_tokens=5, random_state=0).fit(images)
    >>> steerer.predict(images).shape
    (2,)
    """

    _parameter_constraints = {
        "backbone": "no_validation",
        "prompt": [str],
        "vsv": ["boolean"],
        "vsv_lambda": [Interval(Real, 0, None, closed="left")],
        "vsv_layers": ["array-like", None],
        "vsv_site": [StrOptions({"mlp_output", "residual"})],
        "vsv_adaptive": ["boolean"],
        "vsv_mode": [StrOptions({"per_sample", "fitted"})],
        "sla": ["boolean"],
        "sla_gamma": [Interval(Real, 0, 1, closed="both")],
        "sla_window": [Interval(Integral, 1, None, closed="left")],
        "sla_layers": [tuple, list, None],
        "sla_final_norm": ["boolean"],
        "decoding": [StrOptions({"greedy", "beam", "nucleus"})],
        "num_beams": [Interval(Integral, 1, None, closed="left")],
        "top_p": [Interval(Real, 0, 1, closed="right")],
        "top_k": [Interval(Integral, 0, None, closed="left")],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "repetition_penalty": [Interval(Real, 0, None, closed="neither")],
        "max_new_tokens": [Interval(Integral, 0, None, closed="left")],
        "vocabulary": ["array-like", None],
        "scoring": [StrOptions(set(_SCORINGS))],
        "image_shape": [tuple, list, None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        **shared_constraints("device", "random_state"),
    }

    def __init__(self, backbone=None, prompt=DEFAULT_PROMPT, vsv=True, vsv_lambda=0.1, vsv_layers=None,
                 vsv_site="mlp_output", vsv_adaptive=True, vsv_mode="per_sample", sla=True, sla_gamma=0.3,
                 sla_window=5, sla_layers=None, sla_final_norm=False, decoding="greedy", num_beams=5, top_p=0.9,
                 top_k=0, temperature=1.0, repetition_penalty=1.0, max_new_tokens=80, vocabulary=None,
                 scoring="chair_i", image_shape=None, batch_size=8, device="cpu", random_state=None):
        self.backbone = backbone
        self.prompt = prompt
        self.vsv = vsv
        self.vsv_lambda = vsv_lambda
        self.vsv_layers = vsv_layers
        self.vsv_site = vsv_site
        self.vsv_adaptive = vsv_adaptive
        self.vsv_mode = vsv_mode
        self.sla = sla
        self.sla_gamma = sla_gamma
        self.sla_window = sla_window
        self.sla_layers = sla_layers
        self.sla_final_norm = sla_final_norm
        self.decoding = decoding
        self.num_beams = num_beams
        self.top_p = top_p
        self.top_k = top_k
        self.temperature = temperature
        self.repetition_penalty = repetition_penalty
        self.max_new_tokens = max_new_tokens
        self.vocabulary = vocabulary
        self.scoring = scoring
        self.image_shape = image_shape
        self.batch_size = batch_size
        self.device = device
        self.random_state = random_state

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X=None, y=None):
        """Resolve the backbone and layers; with ``vsv_mode="fitted"``, fit the steering vector on ``X``.

        Parameters
        ----------
        X : images, list of dicts, DataFrame, 2-D array or None
            Needed by ``vsv_mode="fitted"``; otherwise only validated.
        y : None
            Ignored.

        Returns
        -------
        self : VISTASteerer
        """
        self._check_image_shape()
        self._resolve_backbone()
        self.vsv_layers_ = self._resolve_layers(self.vsv_layers, "vsv_layers")
        if self.vsv_layers is None and self.vsv_site == "mlp_output":
            # A backbone whose layers are not all steerable at their MLP (Mllama's gated cross-attention layers).
            self.vsv_layers_ = list(getattr(self.backbone_, "mlp_steering_layers", self.vsv_layers_))
        self.sla_layers_ = self._resolve_sla_layers()
        for stale in ("n_features_in_", "feature_names_in_"):
            if hasattr(self, stale):
                delattr(self, stale)
        self.vector_ = None
        if X is None:
            if self.vsv_mode == "fitted":
                raise ValueError("vsv_mode='fitted' fits its steering vector on X; fit(X) needs images.")
            return self
        images, prompts = self._read(X, reset=True)
        if self.vsv_mode == "fitted":
            differences = self._differences(images, prompts, self.vsv_layers_)
            flat = _fitted_vector(differences.reshape(len(differences), -1))
            self.vector_ = flat.reshape(differences.shape[1:]).astype(np.float32)
        return self

    def _resolve_sla_layers(self):
        last = self.n_layers_ - 1
        if self.sla_layers is not None:
            if len(self.sla_layers) != 2:
                raise ValueError(f"sla_layers must be (start, end), inclusive 0-based; got {self.sla_layers!r}.")
            start, end = (int(v) for v in self.sla_layers)
            if not 0 <= start <= end < last:
                raise ValueError(f"sla_layers={self.sla_layers!r}: expected 0 <= start <= end < {last} "
                                 f"(layers below the last of the backbone's {self.n_layers_}).")
            return list(range(start, end + 1))
        if self.sla and self.sla_window > last:
            raise ValueError(f"sla_window={self.sla_window} layers below the last one, but the backbone has "
                             f"{self.n_layers_} decoder layers: sla_window can be at most {last}"
                             f"{'' if last else ' (there is no layer below the last: pass sla=False)'}.")
        window = min(self.sla_window, last)
        return list(range(last - window, last))

    # ------------------------------------------------------------------
    # generation
    # ------------------------------------------------------------------
    def _generate_ids(self, images, prompts, vsv_lambda=None, sla_gamma=None, tracked_ids=None):
        """Generated ids a sample; with ``tracked_ids``, also their logit-lens ranks (steps, k, layers) a sample."""
        strength = self.vsv_lambda if vsv_lambda is None else vsv_lambda
        gamma = self.sla_gamma if sla_gamma is None else sla_gamma
        generator = torch.Generator(device=self._device()).manual_seed(seed_from_random_state(self.random_state))
        every_layer = list(range(self.n_layers_))
        results, ranks = [], []
        with torch.inference_mode():
            for batch, these in self._batches(images, prompts):
                vectors = None
                if self.vsv and strength > 0:
                    if self.vector_ is not None:
                        vectors = torch.as_tensor(self.vector_).expand(len(batch), *self.vector_.shape)
                    else:
                        vectors = steering_vectors(self.backbone_, batch, these, self.vsv_layers_)
                inputs = self.backbone_.build_inputs(batch, these, with_image=True)
                with ExitStack() as stack:
                    logits_fn = stack.enter_context(vista(
                        self.backbone_, vectors, self.vsv_layers_, strength, self.vsv_site, self.vsv_adaptive,
                        self.sla_layers_ if self.sla else [], gamma, self.sla_final_norm))
                    steps = []
                    if tracked_ids is not None:
                        # Entered after the steering hooks: the lens sees the steered states.
                        states = stack.enter_context(capture_last_states(self.backbone_, every_layer))
                        logits_fn = _traced(logits_fn or self.backbone_.lm_head, lambda: steps.append(
                            logit_lens_ranks(self.backbone_, states, every_layer, tracked_ids).cpu()))
                    ids = generate(
                        self.backbone_, inputs, max_new_tokens=self.max_new_tokens, decoding=self.decoding,
                        num_beams=self.num_beams, top_p=self.top_p, top_k=self.top_k,
                        temperature=self.temperature, repetition_penalty=self.repetition_penalty,
                        logits_fn=logits_fn, generator=generator,
                    )
                results += ids
                if tracked_ids is not None:
                    stacked = torch.stack(steps, dim=1) if steps else torch.zeros(len(ids), 0, len(tracked_ids),
                                                                                   self.n_layers_)
                    ranks += [stacked[i, :len(row)].numpy() for i, row in enumerate(ids)]
        return (results, ranks) if tracked_ids is not None else results

    def predict(self, X):
        """Generated captions of ``X``.

        Parameters
        ----------
        X : images, list of dicts, DataFrame or 2-D array

        Returns
        -------
        ndarray of shape (n_samples,), dtype object
            One string a sample.
        """
        check_is_fitted(self, "backbone_")
        images, prompts = self._read(X, reset=False)
        ids = self._generate_ids(images, prompts)
        captions = np.empty(len(images), dtype=object)
        captions[:] = [self.backbone_.decode(row) for row in ids]
        if self.vsv and self.vsv_lambda > 0 and self.max_new_tokens > 0 and len(ids):
            empty = np.mean([not c.strip() for c in captions])
            looping = np.mean([len(row) >= self.max_new_tokens and _loops(row) for row in ids])
            if empty + looping > COLLAPSE_WARNING:
                warn_user(
                    f"{empty:.0%} of the captions are empty and {looping:.0%} run on to max_new_tokens in a "
                    f"loop of repeated words: vsv_lambda={self.vsv_lambda} steers this model too hard (the "
                    "collapse the official VISTA issue #2 reports); lower it, e.g. by a grid search with "
                    "score().", UserWarning,
                )
        return captions

    def transform(self, X):
        """Each sample's steering vectors, (n_samples, n_vsv_layers * d), as :class:`VisualSteeringVector`.

        Parameters
        ----------
        X : images, list of dicts, DataFrame or 2-D array

        Returns
        -------
        ndarray of shape (n_samples, n_vsv_layers * d), float32
        """
        check_is_fitted(self, "backbone_")
        images, prompts = self._read(X, reset=False)
        vectors = self._differences(images, prompts, self.vsv_layers_)
        return vectors.reshape(len(vectors), -1)

    def token_rankings(self, X, tokens, return_tokens=False):
        """Where ``tokens`` rank in every layer's vocabulary at every decoding step (the paper's Eq. 3).

        Captions are generated as :meth:`predict` generates them (steered
        when VISTA is on; fit with ``vsv=False, sla=False`` for the plain
        model). At each step, each decoder layer's last hidden state goes
        through the final norm and the LM head (the logit lens), and each
        tracked token's rank in that distribution is recorded: 1 is the most
        likely token, and the last layer's lens is the model's own logits
        (before self-logits augmentation). The paper reads three patterns
        from such ranks: words of the image rank lower as the caption goes
        on, they rank highest a little below the top layer, and objects the
        caption never names still rank high.

        Parameters
        ----------
        X : images, list of dicts, DataFrame or 2-D array
        tokens : sequence of str or int
            Words (their first token, through the backbone's ``token_id``)
            or token ids to track, the same for every sample; split the
            result by what each image holds.
        return_tokens : bool, default=False
            Also return each sample's generated tokens as text, one a step.

        Returns
        -------
        ranks : ndarray of shape (n_samples, n_tokens, n_steps, n_layers)
            Float ranks; ``n_steps`` is the longest caption's token count,
            and the steps after a shorter caption ended are NaN. Step ``t``
            is the distribution that chose token ``t``.
        generated : list of list of str
            Only with ``return_tokens=True``.
        """
        check_is_fitted(self, "backbone_")
        if self.decoding == "beam":
            raise ValueError("token_rankings follows one sequence a sample; beam search reorders its beams "
                             "every step. Use decoding='greedy' or 'nucleus'.")
        tracked = self._token_ids(tokens)
        images, prompts = self._read(X, reset=False)
        ids, ranks = self._generate_ids(images, prompts, tracked_ids=tracked)
        n_steps = max((len(row) for row in ids), default=0)
        out = np.full((len(ids), len(tracked), n_steps, self.n_layers_), np.nan)
        for i, sample in enumerate(ranks):
            out[i, :, :len(sample)] = sample.transpose(1, 0, 2)
        if not return_tokens:
            return out
        return out, [[self.backbone_.decode([t]) for t in row] for row in ids]

    def _token_ids(self, tokens):
        tokens = [tokens] if isinstance(tokens, (str, int, np.integer)) else list(tokens)
        if not tokens:
            raise ValueError("tokens is empty: name at least one word or token id to track.")
        vocab_size = int(self.backbone_.lm_head.weight.shape[0])
        ids = []
        for token in tokens:
            if isinstance(token, str):
                if not hasattr(self.backbone_, "token_id"):
                    raise ValueError(f"{type(self.backbone_).__name__} has no token_id(word); pass token ids.")
                token = self.backbone_.token_id(token)
            if not isinstance(token, (int, np.integer)) or not 0 <= int(token) < vocab_size:
                raise ValueError(f"tokens holds {token!r}; expected words or token ids in 0..{vocab_size - 1}.")
            ids.append(int(token))
        return ids

    # ------------------------------------------------------------------
    # scoring
    # ------------------------------------------------------------------
    def _vocabulary(self):
        if self.vocabulary is not None:
            return list(self.vocabulary)
        from ...datasets import object_classes

        return object_classes()

    def _truth(self, y, n):
        if y is None:
            raise ValueError("score needs y: the ground-truth objects (sets of names) or reference captions.")
        truth = list(y)
        if len(truth) != n:
            raise ValueError(f"y has {len(truth)} entries for {n} samples.")
        vocabulary = self._vocabulary()
        objects = []
        for item in truth:
            if isinstance(item, str):
                objects.append(set(chair_mentions(item, vocabulary)))
            elif isinstance(item, (set, frozenset, list, tuple, np.ndarray)):
                objects.append({str(o) for o in item})
            else:
                raise ValueError(f"y holds {type(item).__name__}; expected sets of object names or reference "
                                 "captions (str).")
        return objects

    def chair_report(self, X, y):
        """All CHAIR metrics (:func:`skicml.vlm.chair`) of the captions of ``X`` against ``y``.

        Parameters
        ----------
        X : images, list of dicts, DataFrame or 2-D array
        y : sequence of sets of str or of str
            Ground-truth object names per sample, or reference captions.

        Returns
        -------
        dict
        """
        captions = self.predict(X)
        return chair(list(captions), self._truth(y, len(captions)), self._vocabulary())

    def score(self, X, y):
        """``scoring`` of the captions of ``X`` against ``y``, greater is better (-CHAIR_i by default).

        Parameters
        ----------
        X : images, list of dicts, DataFrame or 2-D array
        y : sequence of sets of str or of str
            Ground-truth object names per sample, or reference captions.

        Returns
        -------
        float
        """
        return _SCORINGS[self.scoring] * float(self.chair_report(X, y)[self.scoring])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = []
        tags.non_deterministic = self.decoding == "nucleus"
        captions = ("predict returns captions (strings), which this check compares with assert_allclose; "
                    "tests/vlm/test_vista.py checks the same property on the captions exactly")
        tags.expected_failed_checks = {
            **tags.expected_failed_checks,
            **out_of_range_row_checks(),
            "check_pipeline_consistency": captions,
            "check_estimators_pickle": captions,
            "check_methods_sample_order_invariance": captions,
            "check_methods_subset_invariance": captions,
            "check_fit_idempotent": captions,
            "check_fit_score_takes_y": ("score reads y as ground-truth object sets or reference captions "
                                        "(CHAIR); the check passes numeric labels"),
        }
        tags.requires_fit = True
        tags.target_tags.required = False
        return tags
