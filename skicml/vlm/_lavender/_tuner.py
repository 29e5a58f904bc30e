"""``LavenderTuner``: caption fine-tuning with Lavender's attention alignment (Jin et al., ICML 2025)."""

from __future__ import annotations

import copy
import inspect
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from ...base import TorchEstimatorMixin, seeded, warn_user
from ...nn.lora import LoRA
from ...utils.param_validation import Integral, Interval, Real, StrOptions, fit_context, shared_constraints
from .._backbone import WORD, as_backbone, check_tunable
from .._generate import generate
from .._grounding import check_word_maps
from .._input import _VLMInputMixin
from .._text import DEFAULT_PROMPT
from ._align import Aligner, align_loss, grid_maps, keyed_words, minmax_maps, pool_word_maps, word_hits

__all__ = ["LavenderTuner"]

_INFERENCE_BATCH = 64


def _chunks(tensors, device):
    """The rows of a dict of tensors in chunks of ``_INFERENCE_BATCH``, moved to ``device``."""
    n_rows = len(next(iter(tensors.values())))
    for start in range(0, n_rows, _INFERENCE_BATCH):
        yield {k: v[start:start + _INFERENCE_BATCH].to(device) for k, v in tensors.items()}


class LavenderObjective(torch.nn.Module):
    """Cross-entropy of the target captions plus ``align_weight`` times the attention-alignment loss.

    ``forward`` takes one batch of tensors (what the training loop slices:
    the backbone's :meth:`caption_batch` inputs and the teacher's words) and
    returns the loss. Query position ``i`` of the text is keyed to the word
    of the token it is trained to predict (``word_key="target"``; every
    token of a word of several tokens) or to the word its argmax prediction
    spells (``"predicted"``, the official code's keying, single-token words
    only); its image attention in each of ``layers``, as maps, goes through
    the Aligner, and the maps of one word are averaged and compared with the
    teacher's map of that word. The backbone reads the model and the
    attention (:meth:`teacher_forced`), so one objective serves TinyVLM and
    Hugging Face models alike.
    """

    def __init__(self, backbone, aligner, lora, layers, resolution, align_weight, aggregation, word_key):
        super().__init__()
        self.model = backbone.model  # a submodule, so that the training loop sees its parameters
        self.backbone = backbone
        self.aligner, self.lora = aligner, lora
        self.layers, self.resolution, self.align_weight = list(layers), int(resolution), float(align_weight)
        self.aggregation, self.word_key = aggregation, word_key
        self.grid = tuple(int(side) for side in backbone.image_grid)
        self.heads = None  # raw maps average these heads (all when None)
        self.log = []

    def _adapted(self):
        return self.lora.attached(self.backbone.language_model) if self.lora is not None else nullcontext()

    def forward(self, **batch):
        with self._adapted():
            return self._loss(**batch)

    def _loss(self, input_ids, attention_mask, target, word_of, word_tokens, teacher_words, teacher_maps,
              **images):
        align = self.align_weight > 0
        logits, attention, rows, targeted = self.run(input_ids, attention_mask, target, images, align)
        ce = F.cross_entropy(logits[targeted], input_ids[:, 1:logits.shape[1] + 1][targeted])
        if not align:
            self.log.append((float(ce.detach()), 0.0, 0))
            return ce
        keyed = word_of[:, 1:logits.shape[1] + 1] if self.word_key == "target" else logits.argmax(-1)
        maps, word_index = self.student_maps(attention, rows, keyed, targeted, word_tokens, teacher_words)
        n_samples, n_words = teacher_words.shape
        pooled, counts = pool_word_maps(maps, word_index, n_samples, n_words)
        # A word counts when the student has a position for it and the teacher an informative map. The
        # official code also skips student maps of mean 0, which lets the Aligner zero the loss by
        # writing constant maps (min-max scaled to zeros); a constant map is scored like any other.
        matched = (counts > 0) & teacher_words & (teacher_maps.flatten(2).sum(-1) > 0)
        alignment, n_matched = align_loss(pooled, teacher_maps.flatten(2), matched)
        self.log.append((float(ce.detach()), float(alignment.detach()), n_matched))
        return ce + self.align_weight * alignment

    def run(self, input_ids, attention_mask, target, images, with_attention):
        """Teacher-forced logits and, if asked, the image attention of every target position.

        Rows are right-padded: the batch is cut to its longest row, and the
        last token is fed to nobody (nothing is predicted after it).
        """
        width = int(attention_mask.sum(1).max())
        inputs = {**images, "input_ids": input_ids[:, :width - 1], "attention_mask": attention_mask[:, :width - 1]}
        targeted = target[:, 1:width]
        rows = targeted.nonzero()  # (N, 2): sample, query position
        logits, attention = self.backbone.teacher_forced(inputs, self.layers if with_attention else None, rows)
        return logits, attention, rows, targeted

    def student_maps(self, attention, rows, keys, keyed, word_tokens, teacher_words):
        """Aligned maps (N, R * R) of the positions keyed to a teacher word, and their word index."""
        n_words = teacher_words.shape[1]
        if self.word_key == "target":
            hits = word_hits(keys, keyed, n_words)
        else:
            hits = keyed_words(keys, keyed, word_tokens)
        hits = hits & teacher_words[:, None, :]
        chosen = hits[rows[:, 0], rows[:, 1]]  # (rows, W)
        keep = chosen.any(-1)
        rows, word = rows[keep], chosen[keep].float().argmax(-1)
        raw = grid_maps(attention[keep], self.grid, self.resolution)
        n, n_layers, n_heads = raw.shape[:3]
        if self.aligner is None:  # the raw attention, as the spec's probes read it
            if self.heads is not None:
                raw = raw[:, :, list(self.heads)]
            aligned = minmax_maps(raw.mean((1, 2)).reshape(n, self.resolution ** 2))
        elif self.aggregation == "aligner_then_mean":
            aligned = self.aligner(raw.reshape(n * n_layers, n_heads, self.resolution, self.resolution))
            aligned = minmax_maps(aligned.reshape(n, n_layers, self.resolution ** 2)).mean(1)
        else:
            aligned = minmax_maps(self.aligner(raw.mean(1)).reshape(n, self.resolution ** 2))
        return aligned, rows[:, 0] * n_words + word


def _image_paths(X):
    """The image paths of ``X`` when its images are given as files, else None."""
    if hasattr(X, "columns") and "image" in X.columns:
        items = list(X["image"])
    elif isinstance(X, (list, tuple)) and X and all(isinstance(item, dict) for item in X):
        items = [item.get("image") for item in X]
    elif isinstance(X, (list, tuple)):
        items = list(X)
    else:
        return None
    return [str(item) for item in items] if all(isinstance(item, (str, Path)) for item in items) else None


class LavenderTuner(_VLMInputMixin, TorchEstimatorMixin, BaseEstimator):
    """Caption fine-tuning that aligns the model's attention with a teacher's (Lavender, Jin et al., ICML 2025).

    Lavender fine-tunes a vision-language model on image-text pairs with one
    more loss: for each word of the target text that a *teacher* can
    locate in the image, the model's attention from the query that predicts
    the word to the image tokens, read through a small convolutional
    Aligner, should match the teacher's map of that word (mean squared
    error over pixels, weighted by ``align_weight``). The paper's teacher is
    Stable Diffusion's cross-attention; here it is any object with
    ``word_maps(images, captions)``. Only adapters (LoRA) and the Aligner
    train by default; the adapters are merged at the end and the Aligner is
    not used at inference, so nothing of Lavender is left in
    :meth:`predict`.

    Parameters
    ----------
    backbone : str, TinyVLM, HFLlavaAdapter, (model, processor) or None, default=None
        The model to fine-tune (copied, never changed); None is the shipped
        ``tiny-vlm-scenes``. A Hugging Face LLaVA-style model comes with its
        processor, in an :class:`HFLlavaAdapter` or as a pair; its student
        attention is read by hooks through the log-sum-exp route (see the
        user guide), and ``prompt`` must hold its image placeholder once.
    teacher : object or None, default=None
        Has ``word_maps(images, captions) -> list of {word: (R, R) map}``
        (a ``names=`` parameter, if it has one, gets the image file paths
        of ``X``, as :class:`PrecomputedTeacher` needs);
        an unfitted estimator (a :class:`TinyDiffusionTeacher` without
        ``pretrained``) is first fitted, as a copy, on the training pairs.
        Maps given in ``X`` (a ``"teacher_maps"`` key or column) win. Needed
        unless ``align_weight=0`` (plain fine-tuning, the baseline).
    align_weight : float, default=10.0
        Weight of the alignment loss (the official ``sd_xattn_loss_scale``).
    attn_layers : sequence of int or None, default=None
        Decoder layers whose attention is aligned; None is all (the
        cross-attention layers of a backbone whose image enters only there,
        its ``image_attention_layers``: Mllama).
    attn_resolution : int, default=8
        Side of the maps compared; the paper's is 32 (Stable Diffusion's
        latent grid). Teacher maps of another size are area-resized.
    aggregation : {"aligner_then_mean", "mean_then_aligner", "mean"}, default="aligner_then_mean"
        Apply the Aligner to each layer's map and average (the official
        default), average the layers first, or align the mean over heads and
        layers itself, with no Aligner (the official ``diffag_skip_proj``
        idea): then only the model's own attention can move towards the
        teacher's maps, where an Aligner can also learn to read them out of
        a few heads.
    aligner_hidden : int, default=32
    aligner_norm : {"instance", "batch", "group"} or None, default="instance"
    word_key : {"target", "predicted"}, default="target"
        Key a query's map by the word of the token it is trained to predict
        (every token of a word of several tokens, pooled), or by the word
        its argmax prediction spells (the official code; noisier early in
        training, and only words of one token can match).
    peft : {"lora", "full", "none"}, default="lora"
        Train LoRA adapters, every weight, or nothing of the backbone (the
        Aligner only).
    lora_r : int, default=8
    lora_alpha : float, default=32
    lora_dropout : float, default=0.05
    lora_targets : sequence of str or None, default=None
        Last name components of the adapted linear layers of the language
        model; None is the backbone's default, ``("qkv",)`` on TinyVLM and
        ``("q_proj", "v_proj")`` on Hugging Face models (the vision tower
        and projector stay frozen).
    lr : float, default=1e-4
    weight_decay : float, default=0.0
    max_epochs : int, default=3
    batch_size : int, default=4
    prompt : str, default="describe the image in detail :"
        The instruction before each caption (TinyVLM's). A Hugging Face
        model's must hold the image placeholder (``"<image>"``) once; a
        space joins it to the caption unless it ends in one.
    image_shape : tuple or None, default=None
        Shape of one image when ``X`` is a 2-D array of flattened images.
    max_new_tokens : int, default=80
        Caption length limit of :meth:`predict`.
    device : str or torch.device, default="auto"
        Where the fine-tuned copy of the backbone computes.
    random_state : int, RandomState instance or None, default=None
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.

    Attributes
    ----------
    backbone_ : backbone
        The fine-tuned model (adapters merged) behind the protocol.
    teacher_ : object or None
        The teacher the maps came from: ``teacher`` itself, or a fitted copy
        of it when it was an unfitted estimator.
    aligner_ : Aligner or None
        The trained Aligner (None at ``align_weight=0`` and with
        ``aggregation="mean"``).
    history_ : list of dict
        Per epoch: mean ``ce``, mean ``alignment`` and ``n_matched_words``.
    n_matched_words_ : int
        (image, word) pairs of the training set whose word is in the target
        text and has a teacher map.
    n_layers_ : int
    n_iter_ : int
        Epochs run.

    Examples
    --------
    >>> from skicml.datasets import make_object_scenes
    >>> from skicml.vlm import LavenderTuner, OracleMaskTeacher, TinyVLM, scene_vocabulary
    >>> images, captions, objects, masks = make_object_scenes(8, return_masks=True, random_state=0)
    >>> model = TinyVLM(scene_vocabulary(), hidden_size=32, num_layers=2, head_dim=16)
    >>> tuner = LavenderTuner(backbone=model, teacher=OracleMaskTeacher(images, objects, masks),
    ...                       max_epochs=1, random_state=0).fit(images, captions)
    >>> tuner.predict(images[:2]).shape
    (2,)
    """

    _parameter_constraints = {
        "backbone": "no_validation",
        "teacher": "no_validation",
        "align_weight": [Interval(Real, 0, None, closed="left")],
        "attn_layers": ["array-like", None],
        "attn_resolution": [Interval(Integral, 1, None, closed="left")],
        "aggregation": [StrOptions({"aligner_then_mean", "mean_then_aligner", "mean"})],
        "aligner_hidden": [Interval(Integral, 1, None, closed="left")],
        "aligner_norm": [StrOptions({"instance", "batch", "group"}), None],
        "word_key": [StrOptions({"target", "predicted"})],
        "peft": [StrOptions({"lora", "full", "none"})],
        "lora_r": [Interval(Integral, 1, None, closed="left")],
        "lora_alpha": [Interval(Real, 0, None, closed="neither")],
        "lora_dropout": [Interval(Real, 0, 1, closed="left")],
        "lora_targets": ["array-like", None],
        "prompt": [str],
        "image_shape": [tuple, list, None],
        "max_new_tokens": [Interval(Integral, 0, None, closed="left")],
        **shared_constraints("lr", "weight_decay", "max_epochs", "batch_size", "device", "random_state",
                             "verbose"),
    }

    def __init__(self, backbone=None, teacher=None, align_weight=10.0, attn_layers=None, attn_resolution=8,
                 aggregation="aligner_then_mean", aligner_hidden=32, aligner_norm="instance", word_key="target",
                 peft="lora", lora_r=8, lora_alpha=32.0, lora_dropout=0.05, lora_targets=None, lr=1e-4,
                 weight_decay=0.0, max_epochs=3, batch_size=4, prompt=DEFAULT_PROMPT, image_shape=None,
                 max_new_tokens=80, device="auto", random_state=None, verbose="auto"):
        self.backbone = backbone
        self.teacher = teacher
        self.align_weight = align_weight
        self.attn_layers = attn_layers
        self.attn_resolution = attn_resolution
        self.aggregation = aggregation
        self.aligner_hidden = aligner_hidden
        self.aligner_norm = aligner_norm
        self.word_key = word_key
        self.peft = peft
        self.lora_r = lora_r
        self.lora_alpha = lora_alpha
        self.lora_dropout = lora_dropout
        self.lora_targets = lora_targets
        self.lr = lr
        self.weight_decay = weight_decay
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.prompt = prompt
        self.image_shape = image_shape
        self.max_new_tokens = max_new_tokens
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------
    # fitting
    # ------------------------------------------------------------------
    def _resolve_trainable_backbone(self):
        """A private copy of the backbone's model, so that fitting never changes the caller's."""
        source = self.backbone if self.backbone is not None else "tiny-vlm-scenes"
        backbone = check_tunable(as_backbone(source))
        model = copy.deepcopy(backbone.model).to(self._device())
        self.backbone_ = backbone.with_model(model)
        self.n_layers_ = len(self.backbone_.layers)
        self.hidden_size_ = int(self.backbone_.hidden_size)
        return model

    def _targets(self, y, n):
        if y is None:
            raise ValueError("LavenderTuner requires y to be passed, but the target y is None: give the target "
                             "text of each image.")
        if isinstance(y, str):
            raise ValueError(f"y is a single string; pass one target text per image ({n}), as a list of strings.")
        y = np.asarray(y, dtype=object).ravel()
        if len(y) != n:
            raise ValueError(f"y must hold one target text per image ({n}); got {len(y)}.")
        bad = [i for i, text in enumerate(y) if not isinstance(text, str) or not text.strip()]
        if bad:
            raise ValueError(f"y must hold the target text of each image, non-empty strings; y[{bad[0]}] is "
                             f"{y[bad[0]]!r}.")
        return list(y)

    def _teacher_maps(self, X, images, captions):
        given = None
        if hasattr(X, "columns") and "teacher_maps" in X.columns:
            given = list(X["teacher_maps"])
        elif isinstance(X, (list, tuple)) and X and all(isinstance(item, dict) for item in X):
            if any("teacher_maps" in item for item in X):
                given = [item.get("teacher_maps", {}) for item in X]
        self.teacher_ = self.teacher
        if given is None and self.teacher is not None:
            if not hasattr(self.teacher, "word_maps"):
                raise TypeError(f"teacher must have word_maps(images, captions); got {type(self.teacher).__name__}.")
            if isinstance(self.teacher, BaseEstimator):
                try:
                    check_is_fitted(self.teacher)
                except NotFittedError:
                    # An unfitted estimator teacher learns the training pairs (a copy: the caller's stays as it is).
                    self.teacher_ = clone(self.teacher).fit(images, captions)
            if "names" in inspect.signature(self.teacher_.word_maps).parameters:
                given = self.teacher_.word_maps(images, captions, names=_image_paths(X))
            else:
                given = self.teacher_.word_maps(images, captions)
        if given is None:
            if self.align_weight > 0:
                raise ValueError("LavenderTuner needs a teacher (teacher=...) or per-image 'teacher_maps' in X "
                                 "when align_weight > 0; align_weight=0 is plain fine-tuning.")
            given = [{} for _ in images]
        return check_word_maps(given, len(images), self.attn_resolution, name="teacher maps")

    def _tensors(self, images, prompts, captions, maps=None):
        """The backbone's teacher-forcing rows and, with ``maps``, each row's teacher words.

        Returns the tensors the objective reads and, per row, its teacher
        words in the order of the word axis. A teacher word takes part when
        it is a word (punctuation is none) that the caption holds or that
        single tokens spell (which ``word_key="predicted"`` can match).
        """
        inputs, caption_words = self.backbone_.caption_batch(images, prompts, captions)
        if maps is None:
            return inputs, None
        return inputs, self._add_teacher_words(inputs, caption_words, maps)

    def _add_teacher_words(self, inputs, caption_words, maps):
        """Add each row's teacher words to ``inputs`` (``word_of``, ``word_tokens``, ``teacher_*``); return them."""
        spellings = {}

        def spelled(word):
            if word not in spellings:
                spellings[word] = list(self.backbone_.word_token_ids(word))
            return spellings[word]

        chosen, tokens = [], []
        for teacher, words in zip(maps, caption_words):
            in_caption = {}
            for word, positions in words:
                in_caption.setdefault(word, []).extend(positions)
            these = [w for w in teacher if WORD.fullmatch(w) and (w in in_caption or spelled(w))]
            chosen.append(these)
            ids = inputs["input_ids"]
            row_tokens = []
            for w in these:
                # The caption's own spelling counts too, where the word is one token there.
                own = in_caption.get(w, [])
                context = {int(ids[len(chosen) - 1, p]) for p in own} if len(own) == 1 else set()
                row_tokens.append(sorted(set(spelled(w)) | context))
            tokens.append(row_tokens)
        n_rows, width = inputs["input_ids"].shape
        n_words = max(1, max(map(len, chosen)))
        n_spellings = max([1] + [len(t) for row in tokens for t in row])
        side = self.attn_resolution
        inputs["word_of"] = torch.full((n_rows, width), -1, dtype=torch.long)
        inputs["word_tokens"] = torch.full((n_rows, n_words, n_spellings), -1, dtype=torch.long)
        inputs["teacher_words"] = torch.zeros(n_rows, n_words, dtype=torch.bool)
        inputs["teacher_maps"] = torch.zeros(n_rows, n_words, side, side)
        for i, (these, row_tokens, words) in enumerate(zip(chosen, tokens, caption_words)):
            index = {w: j for j, w in enumerate(these)}
            for word, positions in words:
                if word in index:
                    inputs["word_of"][i, positions] = index[word]
            for j, (w, spellings_of_w) in enumerate(zip(these, row_tokens)):
                inputs["word_tokens"][i, j, :len(spellings_of_w)] = torch.as_tensor(spellings_of_w, dtype=torch.long)
                inputs["teacher_words"][i, j] = True
                inputs["teacher_maps"][i, j] = torch.as_tensor(maps[i][w])
        return chosen

    def _attention_layers(self, layers, name="attn_layers"):
        if layers is None and hasattr(self.backbone_, "image_attention_layers"):
            return list(self.backbone_.image_attention_layers)
        return self._resolve_layers(layers, name)

    def _objective(self):
        layers = self._attention_layers(self.attn_layers)
        aligner = None
        if self.align_weight > 0 and self.aggregation != "mean":
            aligner = Aligner(self.backbone_.n_heads, self.aligner_hidden, self.aligner_norm)
        lora = None
        for parameter in self.backbone_.model.parameters():
            parameter.requires_grad_(self.peft == "full")
        if self.peft == "lora":
            lora = LoRA(self.backbone_.language_model, self.lora_targets or self.backbone_.default_lora_targets,
                        self.lora_r, self.lora_alpha, self.lora_dropout)
        return LavenderObjective(self.backbone_, aligner, lora, layers, self.attn_resolution, self.align_weight,
                                 self.aggregation, self.word_key)

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fine-tune on images ``X`` and target texts ``y``.

        Parameters
        ----------
        X : images, list of dicts, DataFrame or 2-D array
            Dicts and data frames may carry each image's ``"teacher_maps"``.
        y : sequence of str
            The target text (caption) of each image.

        Returns
        -------
        self : LavenderTuner
        """
        if y is None:  # before X is read, so that the error names the missing targets
            self._targets(y, 0)
        model = self._resolve_trainable_backbone()
        self._check_image_shape()
        images, prompts = self._read(X, reset=True)
        if len(images) == 0:
            raise ValueError("X holds no images.")
        captions = self._targets(y, len(images))
        self.backbone_.caption_batch(images[:1], prompts if isinstance(prompts, str) else prompts[:1], captions[:1])
        maps = self._teacher_maps(X, images, captions)
        tensors, _ = self._tensors(images, prompts, captions, maps)
        seed = self._seed()
        with seeded(seed):
            objective = self._objective()
        self.n_matched_words_ = int(self._count_matches(tensors))
        if self.align_weight > 0 and self.n_matched_words_ == 0:
            warn_user("no word of the target texts has a teacher map: the alignment loss is zero and this is "
                          "plain fine-tuning. Check that the teacher's words are the captions' words.",
                          UserWarning)
        if self.max_epochs > 0:  # 0 keeps the backbone as it is, without starting the training loop
            model.train()
            objective, _ = self._fit_module(objective, tensors, None, loss=None, seed=seed)
        if objective.lora is not None:
            objective.lora.merge(self.backbone_.language_model)
        for parameter in model.parameters():
            parameter.requires_grad_(True)
        model.eval()
        self.aligner_ = None if objective.aligner is None else objective.aligner.eval()
        self.history_ = self._epochs(objective.log, len(images))
        self.n_iter_ = len(self.history_)
        return self

    @staticmethod
    def _count_matches(tensors):
        hits = word_hits(tensors["word_of"][:, 1:], tensors["target"][:, 1:], tensors["teacher_words"].shape[1])
        return int((hits.any(1) & tensors["teacher_words"]).sum())  # (sample, word) pairs

    def _epochs(self, log, n_samples):
        steps = -(-n_samples // self.batch_size)
        history = []
        for start in range(0, len(log), steps):
            chunk = np.asarray(log[start:start + steps], dtype=float)
            history.append({"ce": float(chunk[:, 0].mean()), "alignment": float(chunk[:, 1].mean()),
                            "n_matched_words": int(chunk[:, 2].sum())})
        return history

    #: Checks that fit with numeric class labels, which a caption model cannot learn from.
    _NUMERIC_LABEL_CHECKS = (
        "check_fit_score_takes_y", "check_estimators_overwrite_params", "check_dont_overwrite_parameters",
        "check_estimators_fit_returns_self", "check_readonly_memmap_input", "check_n_features_in_after_fitting",
        "check_positive_only_tag_during_fit", "check_estimators_dtypes", "check_dtype_object",
        "check_pipeline_consistency", "check_estimators_nan_inf", "check_estimators_pickle",
        "check_f_contiguous_array_estimator", "check_methods_sample_order_invariance",
        "check_methods_subset_invariance", "check_fit2d_1sample", "check_fit2d_1feature", "check_dict_unchanged",
        "check_fit_idempotent", "check_fit_check_is_fitted", "check_n_features_in", "check_fit2d_predict1d",
    )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        reason = ("fit reads y as the target text of each image and refuses numeric labels with a clear error; "
                  "this check fits on numeric labels. tests/vlm/test_lavender.py checks fitting, determinism, "
                  "pickling and batch independence on captions")
        tags.expected_failed_checks = {**tags.expected_failed_checks,
                                       **{name: reason for name in self._NUMERIC_LABEL_CHECKS}}
        tags.target_tags.required = True
        return tags

    # ------------------------------------------------------------------
    # inference
    # ------------------------------------------------------------------
    def predict(self, X):
        """Greedy captions of ``X`` from the fine-tuned model; ndarray of str."""
        check_is_fitted(self, "backbone_")
        images, prompts = self._read(X, reset=False)
        captions = []
        with torch.inference_mode():
            # Inference batches need not be as small as training ones.
            for batch, these in self._batches(images, prompts, size=max(self.batch_size, _INFERENCE_BATCH)):
                inputs = self.backbone_.build_inputs(batch, these)
                captions += [self.backbone_.decode(ids) for ids in
                             generate(self.backbone_, inputs, max_new_tokens=self.max_new_tokens)]
        out = np.empty(len(captions), dtype=object)
        out[:] = captions
        return out

    def score(self, X, y):
        """Mean log-likelihood per target token of the texts ``y`` given ``X`` (greater is better)."""
        check_is_fitted(self, "backbone_")
        images, prompts = self._read(X, reset=False)
        tensors, _ = self._tensors(images, prompts, self._targets(y, len(images)))
        objective = LavenderObjective(self.backbone_, None, None, [], self.attn_resolution, 0.0, self.aggregation,
                                      "target")
        total, count = 0.0, 0
        with torch.inference_mode():
            for part in _chunks(tensors, self._device()):
                ids, mask, target = part.pop("input_ids"), part.pop("attention_mask"), part.pop("target")
                logits, _, _, targeted = objective.run(ids, mask, target, part, with_attention=False)
                labels = ids[:, 1:logits.shape[1] + 1]
                total -= float(F.cross_entropy(logits[targeted], labels[targeted], reduction="sum"))
                count += int(targeted.sum())
        return total / max(count, 1)

    def word_maps(self, X, y, aligned=True, layers=None, heads=None):
        """The student's per-word maps of the words of the texts ``y``, as a teacher gives them.

        The map of a word is the model's attention from each query that
        predicts one of the word's tokens to the image, averaged over the
        word's positions and min-max scaled. With ``aligned=True`` it goes
        through the trained Aligner first: the maps the alignment loss
        compares with the teacher's (the spec's ``transform``; a
        scikit-learn transform must return an array). With
        ``aligned=False`` it is the raw attention, the mean over heads and
        the aligned layers: what the model itself attends to, comparable
        across fine-tuning arms (including ``align_weight=0``, which trains
        no Aligner).

        Parameters
        ----------
        X : images, list of dicts, DataFrame or 2-D array
        y : sequence of str
        aligned : bool, default=True
        layers : sequence of int or None, default=None
            With ``aligned=False``: the layers averaged (None is
            ``attn_layers``). A single layer and head show what one head
            attends to (a model may ground words in one head while the mean
            over heads does not).
        heads : sequence of int or None, default=None
            With ``aligned=False``: the heads averaged (None is all).

        Returns
        -------
        list of dict
            One ``{word: (attn_resolution, attn_resolution) map}`` per image,
            for the words of its text (lower-cased; punctuation left out).
        """
        check_is_fitted(self, "backbone_")
        if aligned and self.aligner_ is None:
            raise ValueError("aligned maps read the Aligner, which align_weight=0 and aggregation='mean' do not "
                             "train; use aligned=False for the raw attention.")
        if aligned and (layers is not None or heads is not None):
            raise ValueError("layers and heads choose what raw maps average; the aligned maps read the layers "
                             "the Aligner was trained on. Pass aligned=False.")
        n_heads = self.backbone_.n_heads
        if heads is not None and (not len(heads) or any(not 0 <= int(h) < n_heads for h in heads)):
            raise ValueError(f"heads={heads!r}: expected head indices in 0..{n_heads - 1}.")
        chosen = self._attention_layers(self.attn_layers if layers is None else layers, "layers")
        images, prompts = self._read(X, reset=False)
        captions = self._targets(y, len(images))
        side = self.attn_resolution
        tensors, caption_words = self.backbone_.caption_batch(images, prompts, captions)
        placeholders = [{word: np.zeros((side, side)) for word, _ in words} for words in caption_words]
        words = self._add_teacher_words(tensors, caption_words, placeholders)
        objective = LavenderObjective(self.backbone_, self.aligner_ if aligned else None, None, chosen, side, 1.0,
                                      self.aggregation, "target")
        objective.heads = None if heads is None else [int(h) for h in heads]
        out = []
        with torch.inference_mode():
            for start, part in zip(range(0, len(images), _INFERENCE_BATCH), _chunks(tensors, self._device())):
                ids, mask, target = part.pop("input_ids"), part.pop("attention_mask"), part.pop("target")
                word_of, word_tokens = part.pop("word_of"), part.pop("word_tokens")
                teacher_words = part.pop("teacher_words")
                part.pop("teacher_maps")
                logits, attention, rows, targeted = objective.run(ids, mask, target, part, with_attention=True)
                keys = word_of[:, 1:logits.shape[1] + 1]
                maps, word_index = objective.student_maps(attention, rows, keys, targeted, word_tokens, teacher_words)
                pooled, counts = pool_word_maps(maps, word_index, len(ids), teacher_words.shape[1])
                for i in range(len(ids)):
                    out.append({word: pooled[i, j].reshape(side, side).cpu().numpy()
                                for j, word in enumerate(words[start + i]) if counts[i, j] > 0})
        return out
