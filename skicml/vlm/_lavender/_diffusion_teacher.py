"""``TinyDiffusionTeacher``: per-word attention maps of a small text-conditioned diffusion model."""

from __future__ import annotations

import numbers
import re

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from ..._weights import load_module
from ...base import TorchEstimatorMixin, seeded
from ...utils.images import check_images, image_input_kind, images_from_rows, out_of_range_row_checks
from ...utils.param_validation import Integral, Interval, Real, fit_context, shared_constraints
from .._grounding import minmax, resize_map
from .._text import SPECIAL_TOKENS, WordTokenizer
from ._teacher_model import TeacherDDPM

__all__ = ["TinyDiffusionTeacher"]

#: Seed of the noise images that word maps and scores add to the real images:
#: one image per timestep, shared by every sample, so a sample's map or score
#: never depends on the batch it came in.
NOISE_SEED = 0
#: Timesteps of :meth:`TinyDiffusionTeacher.score_samples`, spread over the schedule.
N_SCORE_TIMESTEPS = 10
_WORD = re.compile(r"[a-z0-9]+")
# Constructor arguments that define the network; a pretrained file brings its own.
_ARCHITECTURE = ("image_size", "patch", "d_model", "n_layers", "n_heads", "n_steps", "beta_max", "caption_dropout")


class TinyDiffusionTeacher(TorchEstimatorMixin, BaseEstimator):
    """Per-word attention maps of a small text-conditioned diffusion model: Lavender's offline teacher.

    Lavender (Jin et al., ICML 2025) fine-tunes a vision-language model so
    that its attention from each word to the image matches a text-to-image
    diffusion model's cross-attention for that word. This teacher is such a
    diffusion model, small enough to train on a CPU: a pixel-space DDPM
    (epsilon prediction, linear betas) whose image patches self-attend, then
    cross-attend to the caption's word embeddings, then pass an MLP, in
    each of ``n_layers`` blocks. ``fit`` trains it to denoise the images
    given their captions; :meth:`word_maps` noises a *real* image to a few
    low-noise timesteps (no inversion), runs it with its caption, and
    averages the cross-attention probabilities over heads, blocks and
    timesteps into one map per word, the prompt-to-prompt recipe that the
    official Lavender code reads from Stable Diffusion. The shipped
    ``"tiny-diffusion-scenes"`` is trained on
    :func:`skicml.datasets.make_object_scenes`.

    Parameters
    ----------
    d_model : int, default=64
        Width of the tokens.
    n_layers : int, default=3
        Blocks (self-attention, cross-attention, MLP).
    n_heads : int, default=4
    patch : int, default=6
        Side of the square patches; ``image_size / patch`` is the side of
        the token grid and of the native maps (8 at the defaults).
    image_size : int, default=48
        Side in pixels of the square images the network reads. Images of
        another size are refused; rows of a 2-D ``X`` are resized to it.
    n_steps : int, default=100
        Timesteps of the noise schedule.
    beta_max : float, default=0.05
        Last beta of the linear schedule (the first is 1e-4).
    caption_dropout : float, default=0.1
        Share of training captions dropped, so that the model also learns
        to denoise without text (what :meth:`score_samples` uses when it is
        given no captions).
    extract_timesteps : sequence of int, default=(0, 1, 2)
        Timesteps at which :meth:`word_maps` reads the attention (0 is the
        least noise), each with its own fixed noise image. Low-noise steps
        localise best: the Lavender spec's probe found t <= 20% of the
        schedule best and near-pure noise at chance; on the shipped teacher
        pointing falls steadily from t = 1 on (see its provenance's
        calibration table), and (0, 1, 2) points better than the spec's
        (2, 5, 10).
    extract_blocks : sequence of int or None, default=None
        Blocks (0-based) whose attention is averaged; None is all of them.
    max_epochs : int, default=10
        ``0`` keeps the random network.
    batch_size : int, default=64
        Of training, and of the forward passes of the other methods.
    lr : float, default=2e-3
    weight_decay : float, default=0.0
    pretrained : str, path-like or None, default=None
        A shipped teacher's name (``"tiny-diffusion-scenes"``) or the path of
        a file in that format. Its network, vocabulary and weights are used
        as they are: ``fit`` trains nothing, only checks ``X`` (and may be
        called with no data), and the architecture parameters above are
        ignored.
    image_shape : tuple of int or None, default=None
        ``(height, width[, channels])`` of the rows of a 2-D ``X``; without
        it such rows are read as :func:`skicml.utils.images.images_from_rows`
        reads them. Rows are read like images: uint8 rows as 0..255 pixels,
        float rows as intensities in [0, 1] (others are refused).
    device : str or torch.device, default="auto"
    random_state : int, RandomState instance or None, default=None
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.

    Attributes
    ----------
    module_ : torch.nn.Module
        The diffusion network, in eval mode.
    vocabulary_ : list of str
        The words it knows (special tokens first): those of the training
        captions, or the pretrained file's.
    config_ : dict
        Its architecture.
    grid_size_ : int
        Side of the native maps.
    history_ : list of float
        Training loss per epoch (empty for a pretrained teacher).
    n_iter_ : int
        Epochs run.
    provenance_ : dict
        How the weights were made; a shipped teacher's includes its pointing
        accuracy on held-out scenes (``"pointing_accuracy"``).
    n_features_in_ : int
        Only when fitted on a 2-D array.

    See Also
    --------
    skicml.vlm._grounding.pointing_accuracy : Whether each word's map peaks on its object.

    Examples
    --------
    >>> from skicml.datasets import make_object_scenes
    >>> from skicml.vlm import TinyDiffusionTeacher
    >>> images, captions, _ = make_object_scenes(8, image_size=24, random_state=0)
    >>> teacher = TinyDiffusionTeacher(d_model=16, n_layers=1, image_size=24, max_epochs=1, random_state=0)
    >>> maps = teacher.fit(images, captions).word_maps(images[:1], ["a red circle"])
    >>> sorted(maps[0]), maps[0]["circle"].shape
    (['a', 'circle', 'red'], (4, 4))
    """

    _parameter_constraints = {
        **{name: [Interval(Integral, 1, None, closed="left")]
           for name in ("d_model", "n_layers", "n_heads", "patch", "image_size", "n_steps")},
        "beta_max": [Interval(Real, 0, 1, closed="neither")],
        "caption_dropout": [Interval(Real, 0, 1, closed="left")],
        "extract_timesteps": ["array-like"],
        "extract_blocks": ["array-like", None],
        "image_shape": [tuple, list, None],
        **shared_constraints("max_epochs", "batch_size", "lr", "weight_decay", "pretrained", "device",
                             "random_state", "verbose"),
    }

    def __init__(self, d_model=64, n_layers=3, n_heads=4, patch=6, image_size=48, n_steps=100, beta_max=0.05,
                 caption_dropout=0.1, extract_timesteps=(0, 1, 2), extract_blocks=None, max_epochs=10,
                 batch_size=64, lr=2e-3, weight_decay=0.0, pretrained=None, image_shape=None, device="auto",
                 random_state=None, verbose="auto"):
        self.d_model = d_model
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.patch = patch
        self.image_size = image_size
        self.n_steps = n_steps
        self.beta_max = beta_max
        self.caption_dropout = caption_dropout
        self.extract_timesteps = extract_timesteps
        self.extract_blocks = extract_blocks
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.pretrained = pretrained
        self.image_shape = image_shape
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X=None, y=None):
        """Train the diffusion model on images ``X`` and their captions ``y`` (or load ``pretrained``).

        Parameters
        ----------
        X : images or 2-D array, or None
            ``(n, H, W, C)`` or ``(n, H, W)`` arrays (uint8, or floats in
            [0, 1]), a list of PIL images, arrays or paths, or rows of
            flattened images (see ``image_shape``). None only with
            ``pretrained``.
        y : sequence of str
            One caption per image (numbers are read as their text). Not
            needed with ``pretrained``.

        Returns
        -------
        self : TinyDiffusionTeacher
        """
        for stale in ("n_features_in_", "feature_names_in_"):
            if hasattr(self, stale):
                delattr(self, stale)
        if self.pretrained is not None:
            self._load_pretrained()
            if X is not None:
                images = self._read_images(X, reset=True)
                if y is not None:
                    self._check_captions(y, len(images), "y")
            return self
        if X is None:
            raise ValueError(f"{type(self).__name__}.fit needs images X and captions y, or pretrained=<name "
                             "or path> to use trained weights.")
        if y is None:  # before X is read, so that the error names the missing captions
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None: pass "
                             "one caption per image.")
        if self.image_size % self.patch:
            raise ValueError(f"image_size={self.image_size} is not a multiple of patch={self.patch}: the "
                             "patches must tile the image.")
        if self.d_model % self.n_heads or self.d_model % 4:
            raise ValueError(f"d_model={self.d_model} must be a multiple of n_heads={self.n_heads} and of 4.")
        self.image_size_ = self.image_size
        images = self._read_images(X, reset=True)
        captions = self._check_captions(y, len(images), "y")
        tokenizer = WordTokenizer.from_texts(captions)
        self.vocabulary_ = list(tokenizer.vocabulary)
        self.config_ = {name: getattr(self, name) for name in _ARCHITECTURE}
        seed = self._seed()
        with seeded(seed):
            module = TeacherDDPM(len(self.vocabulary_), pad_id=tokenizer.pad_token_id,
                                 start_id=tokenizer.bos_token_id, **self.config_)
        self._resolve_extraction(module)
        self.grid_size_ = module.grid
        if self.max_epochs == 0:
            self.module_, self.history_, self.n_iter_ = module.eval(), [], 0
        else:
            inputs = {"images": _to_model_range(images), "word_ids": self._word_ids(captions, tokenizer)}
            self.module_, history = self._fit_module(module, inputs, loss=None, warmup_fraction=0.05,
                                                     grad_clip=1.0, seed=seed)
            self.history_, self.n_iter_ = list(history.train_loss), history.n_epochs
        self.provenance_ = {"trained_by": "fit", "n_images": len(images), "epochs": self.n_iter_}
        return self

    def _load_pretrained(self):
        def build(config):
            vocabulary = config.pop("vocabulary")
            return TeacherDDPM(len(vocabulary), **{k: v for k, v in config.items() if k != "vocab_size"})

        module, config, self.provenance_ = load_module(self.pretrained, build)
        self.vocabulary_ = list(config.pop("vocabulary"))
        self.config_ = {name: config[name] for name in _ARCHITECTURE}
        self.image_size_ = int(config["image_size"])
        self.grid_size_ = module.grid
        self._resolve_extraction(module)
        self.module_ = module.to(self._device()).eval()
        self.history_, self.n_iter_ = [], 0

    @classmethod
    def _from_module(cls, module, vocabulary, provenance=None, **params):
        """A fitted teacher around a trained ``module`` (what the pretraining recipe evaluates)."""
        teacher = cls(**{**{name: module.config[name] for name in _ARCHITECTURE}, **params})
        teacher.vocabulary_ = list(vocabulary)
        teacher.config_ = {name: module.config[name] for name in _ARCHITECTURE}
        teacher.image_size_, teacher.grid_size_ = module.image_size, module.grid
        teacher._resolve_extraction(module)
        teacher.module_ = module.eval()
        teacher.history_, teacher.n_iter_, teacher.provenance_ = [], 0, dict(provenance or {})
        return teacher

    def _resolve_extraction(self, module):
        steps = [int(t) for t in np.ravel(np.asarray(self.extract_timesteps, dtype=object))]
        n_steps = module.schedule.n_timesteps
        if not steps or any(not 0 <= t < n_steps for t in steps):
            raise ValueError(f"extract_timesteps={self.extract_timesteps!r}: expected timesteps in 0..{n_steps - 1} "
                             f"(the schedule has n_steps={n_steps}).")
        n_blocks = len(module.blocks)
        blocks = list(range(n_blocks)) if self.extract_blocks is None else [int(b) for b in self.extract_blocks]
        if not blocks or any(not 0 <= b < n_blocks for b in blocks):
            raise ValueError(f"extract_blocks={self.extract_blocks!r}: expected block indices in 0..{n_blocks - 1} "
                             f"(the network has {n_blocks} blocks).")
        self.extract_timesteps_, self.extract_blocks_ = steps, sorted(set(blocks))

    # ---------------------------------------------------------------- input
    def _read_images(self, X, reset):
        """Images of ``X`` as float32 (n, image_size_, image_size_, 3) in [0, 1]."""
        size = self.image_size_
        if image_input_kind(X) == "embedding":
            rows = validate_data(self, X, reset=reset, dtype="numeric", ensure_all_finite=True)
            images = images_from_rows(rows, (size, size), self.image_shape)
            return _rgb(_resize(images, size))
        images = check_images(X, self.image_shape)
        if not isinstance(images, np.ndarray):
            from PIL import Image

            arrays = [np.asarray(Image.open(i).convert("RGB")) if isinstance(i, str) else np.asarray(i)
                      for i in images]
            arrays = [a[..., None] if a.ndim == 2 else a for a in arrays]
            if len({a.shape for a in arrays}) > 1:
                raise ValueError(f"images must share one shape; got {sorted({a.shape for a in arrays})}.")
            images = np.stack(arrays)
        if images.shape[1:3] != (size, size):
            raise ValueError(f"{type(self).__name__} reads images of {size} x {size} pixels (image_size_); got "
                             f"images of {images.shape[1]} x {images.shape[2]}. Resize them, or fit a teacher "
                             "with image_size set to their size.")
        images = images / np.float32(255.0) if images.dtype.kind in "iub" and images.dtype != bool else images
        return _rgb(np.asarray(images, dtype=np.float32))

    @staticmethod
    def _check_captions(captions, n_images, name):
        if isinstance(captions, str):
            raise ValueError(f"{name} is a single string; pass one caption per image (a list of {n_images}).")
        try:
            captions = list(captions)
        except TypeError as exc:
            raise ValueError(f"{name} must be a sequence of captions (str), one per image; got "
                             f"{type(captions).__name__}.") from exc
        if len(captions) != n_images:
            raise ValueError(f"{name} has {len(captions)} captions for {n_images} images; pass one per image.")
        out = []
        for i, caption in enumerate(captions):
            if isinstance(caption, np.ndarray) and caption.ndim == 0:
                caption = caption.item()
            if isinstance(caption, numbers.Number) and not isinstance(caption, bool) and np.isfinite(caption):
                caption = str(caption)
            if not isinstance(caption, str):
                raise ValueError(f"{name}[{i}] is {caption!r}; captions must be strings (or finite numbers).")
            if not _WORD.search(caption.lower()):
                raise ValueError(f"{name}[{i}] is {caption!r}, a caption without a word; every image needs a "
                                 "caption with at least one word.")
            out.append(caption)
        return out

    @staticmethod
    def _word_ids(captions, tokenizer):
        """Captions as (n, longest) word ids padded with the tokenizer's pad id."""
        rows = [tokenizer.encode(c) for c in captions]
        ids = torch.full((len(rows), max(map(len, rows), default=0)), tokenizer.pad_token_id, dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, :len(row)] = torch.as_tensor(row, dtype=torch.long)
        return ids

    def _batches(self, images, word_ids):
        device = self._device()
        self.module_.to(device)
        for start in range(0, len(images), self.batch_size):
            stop = start + self.batch_size
            yield _to_model_range(images[start:stop]).to(device), word_ids[start:stop].to(device)

    def _noise(self, n_timesteps):
        generator = torch.Generator().manual_seed(NOISE_SEED)
        return torch.randn((n_timesteps, 3, self.image_size_, self.image_size_), generator=generator).to(
            self._device())

    # -------------------------------------------------------------- outputs
    def word_attention(self, X, captions):
        """Cross-attention of every patch to every word of the captions, before pooling.

        Parameters
        ----------
        X : images or 2-D array
        captions : sequence of str

        Returns
        -------
        attention : ndarray of shape (n, grid, grid, max_words), float32
            Averaged over heads, ``extract_blocks`` and ``extract_timesteps``;
            column ``j`` is the ``j``-th token of the caption (words and
            punctuation, as :meth:`skicml.vlm._text.WordTokenizer.words`
            splits it), zero past its end.
        words : list of list of str
            Each caption's tokens.
        """
        check_is_fitted(self, "module_")
        images = self._read_images(X, reset=False)
        captions = self._check_captions(captions, len(images), "captions")
        tokenizer = WordTokenizer(self.vocabulary_)
        word_ids = self._word_ids(captions, tokenizer)
        noise = self._noise(len(self.extract_timesteps_))
        parts = []
        with torch.inference_mode():
            for batch, ids in self._batches(images, word_ids):
                attention = self.module_.word_attention(batch, ids, self.extract_timesteps_, noise,
                                                        self.extract_blocks_)
                parts.append(attention.float().cpu().numpy())
        return np.concatenate(parts), [tokenizer.words(c) for c in captions]

    def word_maps(self, X, captions, resolution=None):
        """One ``{word: map}`` per image: where each word of its caption attends, min-max scaled.

        The image is noised to each of ``extract_timesteps`` (with one fixed
        noise image per timestep), conditioned on its caption, and the
        cross-attention probabilities are averaged over heads, blocks and
        timesteps. A word that occurs several times averages its positions;
        punctuation and words the teacher does not know (not in
        ``vocabulary_``) get no map.

        Parameters
        ----------
        X : images or 2-D array
            As in :meth:`fit`, of the size the teacher reads.
        captions : sequence of str
            One per image.
        resolution : int or None, default=None
            Side of the maps; None is the native grid (``grid_size_``).
            Another side is reached by area resizing
            (:func:`skicml.vlm._grounding.resize_map`) before the scaling.

        Returns
        -------
        list of dict
            ``{word (lower case): float32 (R, R) map in [0, 1]}`` per image;
            each map has minimum 0 and maximum 1 unless it is constant (all
            zeros).
        """
        if resolution is not None and (isinstance(resolution, bool) or not isinstance(resolution, numbers.Integral)
                                       or resolution < 1):
            raise ValueError(f"resolution={resolution!r}; expected None or a whole number >= 1.")
        attention, words = self.word_attention(X, captions)
        return word_maps_from_attention(attention, words, self.vocabulary_, resolution)

    def score_samples(self, X, y=None):
        """Negative denoising error of each image given its caption (higher is likelier).

        A Monte-Carlo proxy of the evidence bound: the mean squared error of
        the predicted noise at ten timesteps spread over the schedule, with
        one fixed noise image per timestep, so scores are deterministic and
        a sample's score does not depend on the others.

        Parameters
        ----------
        X : images or 2-D array
        y : sequence of str or None, default=None
            Captions; None scores the images without text.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "module_")
        images = self._read_images(X, reset=False)
        tokenizer = WordTokenizer(self.vocabulary_)
        if y is None:
            word_ids = torch.zeros((len(images), 0), dtype=torch.long)
        else:
            word_ids = self._word_ids(self._check_captions(y, len(images), "y"), tokenizer)
        n_steps = self.module_.schedule.n_timesteps
        timesteps = np.unique(np.linspace(0, n_steps - 1, N_SCORE_TIMESTEPS).round().astype(int)).tolist()
        noise = self._noise(len(timesteps))
        errors = []
        with torch.inference_mode():
            for batch, ids in self._batches(images, word_ids):
                errors.append(self.module_.denoising_errors(batch, ids, timesteps, noise).double().cpu().numpy())
        return -np.concatenate(errors)

    def score(self, X, y=None):
        """Mean of :meth:`score_samples`: the negative denoising error of the images given their captions.

        Parameters
        ----------
        X : images or 2-D array
        y : sequence of str or None, default=None

        Returns
        -------
        float
        """
        return float(np.mean(self.score_samples(X, y)))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # random_state seeds a network trained from scratch; a pretrained teacher loads the same every time.
        tags.non_deterministic = tags.non_deterministic and self.pretrained is None
        tags.target_tags.required = self.pretrained is None
        tags.expected_failed_checks = {**tags.expected_failed_checks, **out_of_range_row_checks()}
        return tags


def word_maps_from_attention(attention, words, vocabulary, resolution=None):
    """Per-word maps from attention (n, grid, grid, max_words) over caption tokens ``words``.

    Positions of one word are averaged; punctuation and words outside
    ``vocabulary`` are left out; each map is area-resized to ``resolution``
    (if given) and min-max scaled.
    """
    known = set(vocabulary) - set(SPECIAL_TOKENS)
    maps = []
    for per_image, tokens in zip(attention, words):
        positions = {}
        for j, word in enumerate(tokens):
            if word in known and _WORD.fullmatch(word):
                positions.setdefault(word, []).append(j)
        out = {}
        for word, columns in positions.items():
            word_map = per_image[:, :, columns].mean(-1)
            if resolution is not None:
                word_map = resize_map(word_map, resolution)
            out[word] = minmax(word_map)
        maps.append(out)
    return maps


def _to_model_range(images):
    """float [0, 1] (n, H, W, 3) images as a (n, 3, H, W) tensor in [-1, 1]."""
    return torch.as_tensor(np.ascontiguousarray(images), dtype=torch.float32).permute(0, 3, 1, 2) * 2 - 1


def _rgb(images):
    if images.shape[-1] == 1:
        return np.repeat(images, 3, axis=-1)
    return images[..., :3]


def _resize(images, size):
    if images.shape[1:3] == (size, size):
        return images.astype(np.float32, copy=False)
    pixels = torch.as_tensor(np.ascontiguousarray(images), dtype=torch.float32).permute(0, 3, 1, 2)
    pixels = F.interpolate(pixels, size=(size, size), mode="bilinear", align_corners=False)
    return pixels.permute(0, 2, 3, 1).numpy()
