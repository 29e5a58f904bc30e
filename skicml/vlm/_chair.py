"""CHAIR: object hallucination in generated captions (Rohrbach et al., 2018).

:func:`chair` counts, over a set of captions, the object words that name
objects absent from the image, as the CHAIR script of the VISTA repository
(``chair_ans.py``) does for COCO; :func:`make_chair_scorer` wraps it as a
scikit-learn scorer for model selection (``GridSearchCV`` over a steering
strength), and :func:`chair_mentions` lists the object mentions of one
caption. The vocabulary is given, not read from COCO annotations, and no
lemmatiser is needed: synonyms are an explicit mapping.
"""

import re

import numpy as np

__all__ = ["chair", "chair_mentions", "make_chair_scorer"]

_WORD = re.compile(r"[^\W_]+")

#: Metrics of :func:`chair` a scorer can return, with the sign that makes greater better.
_SCORER_SIGNS = {"chair_i": -1, "chair_s": -1, "recall": 1, "precision": 1, "f1": 1}


def _words(text):
    """Lower-cased words: runs of letters and digits (punctuation separates words)."""
    return tuple(_WORD.findall(text.lower()))


def _check_texts(values, name):
    """``values`` as a list of str (a sequence, not one string)."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of str, got a single {type(values).__name__}: {values!r}.")
    try:
        values = list(values)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of str, got {type(values).__name__}.") from None
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(value).__name__}: {value!r}.")
    return values


class _Matcher:
    """Phrases (tuples of words) of a vocabulary and its synonyms, to canonical names."""

    def __init__(self, vocabulary, synonyms):
        names = _check_texts(vocabulary, "vocabulary")
        if not names:
            raise ValueError("vocabulary is empty; pass the object names to look for.")
        self.phrases = phrases = {}  # words of a name or synonym -> the vocabulary name as given
        for name in names:
            words = _words(name)
            if not words:
                raise ValueError(f"vocabulary holds {name!r}, which has no word in it.")
            if words in phrases and phrases[words] != name:
                raise ValueError(f"vocabulary names {phrases[words]!r} and {name!r} are the same phrase.")
            phrases[words] = name
        if synonyms is not None:
            if not hasattr(synonyms, "items"):
                raise TypeError(
                    f"synonyms must be a dict of phrase to vocabulary name, got {type(synonyms).__name__}."
                )
            alternatives = _check_texts(list(synonyms), "synonyms (its keys)")
            targets = _check_texts(list(synonyms.values()), "synonyms (its values)")
            for phrase, target in zip(alternatives, targets):
                canonical = self.name(target)
                if canonical is None:
                    raise ValueError(f"synonyms maps {phrase!r} to {target!r}, which is not in the vocabulary.")
                words = _words(phrase)
                if not words:
                    raise ValueError(f"synonyms holds {phrase!r}, which has no word in it.")
                if phrases.get(words, canonical) != canonical:
                    raise ValueError(
                        f"synonyms maps {phrase!r} to {canonical!r}, but it already names {phrases[words]!r}."
                    )
                phrases[words] = canonical
        self.lengths = sorted({len(words) for words in phrases}, reverse=True)

    def name(self, text):
        """The canonical name of a vocabulary name or synonym, or None."""
        words = _words(text)
        return self.phrases.get(words)

    def mentions(self, caption):
        """Canonical names mentioned in ``caption``, in order: leftmost-longest matches."""
        words = _words(caption)
        found, i = [], 0
        while i < len(words):
            for length in self.lengths:
                name = self.phrases.get(words[i:i + length]) if i + length <= len(words) else None
                if name is not None:
                    found.append(name)
                    i += length
                    break
            else:
                i += 1
        return found, len(words)


def chair_mentions(caption, vocabulary, synonyms=None):
    """The object mentions of one caption, in order, as vocabulary names.

    Words are runs of letters and digits, compared case-insensitively;
    punctuation only separates words and is otherwise ignored ("red, circle"
    reads as "red circle"). From left to right, the longest
    vocabulary name or synonym that starts at the current word is taken and
    its words are skipped, so a word never counts twice and "dark red
    circle" is one mention when both it and "red circle" are names.

    Parameters
    ----------
    caption : str
    vocabulary : sequence of str
        Object names, possibly of several words.
    synonyms : dict of str to str or None, default=None
        Alternative phrases and the vocabulary name each stands for.

    Returns
    -------
    list of str
        The vocabulary names mentioned (as spelled in ``vocabulary``),
        repeated mentions included.

    Examples
    --------
    >>> from skicml.vlm import chair_mentions
    >>> chair_mentions("A red circle, to its right a dark red circle.",
    ...                ["red circle", "dark red circle", "blue square"])
    ['red circle', 'dark red circle']
    >>> chair_mentions("a crimson ball", ["red circle"], synonyms={"crimson ball": "red circle"})
    ['red circle']
    """
    if not isinstance(caption, str):
        raise TypeError(f"caption must be a str, got {type(caption).__name__}: {caption!r}.")
    return _Matcher(vocabulary, synonyms).mentions(caption)[0]


def chair(captions, objects, vocabulary, *, synonyms=None):
    """CHAIR hallucination rates, recall and precision of object mentions in captions.

    The definitions of the CHAIR script (``chair_ans.py`` of the VISTA
    repository, after Rohrbach et al., 2018), as ratios in [0, 1] (the
    papers print percentages):

    - ``chair_i`` = hallucinated mentions / all mentions, over all captions:
      every mention of an object not in the caption's ground truth counts,
      a repeated one once per mention;
    - ``chair_s`` = captions with at least one hallucinated mention / captions;
    - ``recall`` = distinct ground-truth objects mentioned / ground-truth
      objects (summed over captions);
    - ``precision`` = distinct ground-truth objects mentioned / distinct
      objects mentioned (summed over captions);
    - ``f1`` = their harmonic mean.

    Mentions are found by :func:`chair_mentions` (whole words,
    case-insensitive, leftmost-longest match, synonyms collapsed to their
    vocabulary name). Guards instead of NaN: with no mention in any caption
    ``chair_i`` is 0 (nothing was hallucinated) and ``precision`` is 1
    (nothing said was wrong); with no ground-truth object at all ``recall``
    is 1; ``f1`` is 0 when both are 0.

    Parameters
    ----------
    captions : sequence of str
        Generated captions (non-empty).
    objects : sequence of sets or lists of str
        Per caption, the names of the objects really in the image: names of
        ``vocabulary`` or synonyms of them; duplicates are ignored.
    vocabulary : sequence of str
        Object names to look for, possibly of several words ("red circle").
    synonyms : dict of str to str or None, default=None
        Alternative phrases and the vocabulary name each stands for
        ("crimson ball": "red circle").

    Returns
    -------
    dict
        ``chair_s``, ``chair_i``, ``recall``, ``precision``, ``f1`` (floats
        in [0, 1]), ``mean_length`` (words per caption, float) and
        ``n_captions`` (int).

    Raises
    ------
    TypeError
        If ``captions`` or ``vocabulary`` is not a sequence of str, or an
        entry of ``objects`` is a single string or holds a non-string.
    ValueError
        If there are no captions, ``objects`` and ``captions`` differ in
        length, the vocabulary is empty, or a ground-truth object or a
        synonym's target is not in the vocabulary.

    See Also
    --------
    chair_mentions : The mentions of one caption.
    make_chair_scorer : The same numbers as a scikit-learn scorer.
    skicml.datasets.make_object_scenes : Scenes, captions and their objects.

    Examples
    --------
    >>> from skicml.vlm import chair
    >>> scores = chair(
    ...     ["a red circle and a blue square", "a green cross, to its right a red circle"],
    ...     [{"red circle", "blue square"}, {"green cross"}],
    ...     vocabulary=["red circle", "blue square", "green cross"])
    >>> scores["chair_s"], scores["chair_i"], scores["recall"]
    (0.5, 0.25, 1.0)

    On generated scenes, the ground truth comes from the objects table:

    >>> from skicml.datasets import make_object_scenes, object_classes
    >>> _, captions, table = make_object_scenes(3, random_state=0)
    >>> truth = table.groupby("scene")["name"].agg(set)
    >>> chair(captions, truth, object_classes())["chair_i"]
    0.0
    """
    texts = _check_texts(captions, "captions")
    if not texts:
        raise ValueError("captions is empty; pass at least one caption.")
    if isinstance(objects, (str, bytes)):
        raise TypeError("objects must be a sequence of sets or lists of names, one per caption, not a str.")
    truth = list(objects)
    if len(truth) != len(texts):
        raise ValueError(
            f"objects has {len(truth)} entries but captions has {len(texts)}; pass one set of "
            "ground-truth names per caption."
        )
    matcher = _Matcher(vocabulary, synonyms)

    n_mentions = n_hallucinated = n_bad_captions = 0
    n_truth = n_covered = n_distinct = 0
    n_words = 0
    for text, gt_names in zip(texts, _object_name_sets(truth, matcher)):
        found, length = matcher.mentions(text)
        n_words += length
        hallucinated = sum(name not in gt_names for name in found)
        n_mentions += len(found)
        n_hallucinated += hallucinated
        n_bad_captions += hallucinated > 0
        distinct = set(found)
        n_distinct += len(distinct)
        n_covered += len(distinct & gt_names)
        n_truth += len(gt_names)

    recall = n_covered / n_truth if n_truth else 1.0
    precision = n_covered / n_distinct if n_distinct else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "chair_s": n_bad_captions / len(texts),
        "chair_i": n_hallucinated / n_mentions if n_mentions else 0.0,
        "recall": recall,
        "precision": precision,
        "f1": f1,
        "mean_length": n_words / len(texts),
        "n_captions": len(texts),
    }


class _ChairScorer:
    """``scorer(estimator, X, y)``: one :func:`chair` metric of ``estimator.predict(X)``, greater is better."""

    def __init__(self, metric, vocabulary, synonyms):
        self.metric = metric
        self.vocabulary = vocabulary
        self.synonyms = synonyms

    def __call__(self, estimator, X, y, **kwargs):
        if y is None:
            raise ValueError("the CHAIR scorer needs y: one set of ground-truth object names per sample.")
        captions = estimator.predict(X, **kwargs)
        value = chair(captions, y, self.vocabulary, synonyms=self.synonyms)[self.metric]
        return _SCORER_SIGNS[self.metric] * value + 0.0  # + 0.0: no -0.0

    def __repr__(self):
        return f"make_chair_scorer(metric={self.metric!r}, vocabulary=<{len(self.vocabulary)} names>)"


def make_chair_scorer(metric="chair_i", *, vocabulary, synonyms=None):
    """A scikit-learn scorer of generated captions by a CHAIR metric, greater is better.

    The scorer, called as ``scorer(estimator, X, y)``, generates captions
    with ``estimator.predict(X)`` (any object with a ``predict`` method),
    takes ``y`` as the ground-truth object sets (one set or list of names
    per sample) and returns the metric of :func:`chair` with the sign that
    makes greater better: ``-chair_i``, ``-chair_s``, ``recall``,
    ``precision`` or ``f1``. It works wherever scikit-learn takes
    ``scoring=`` (``cross_val_score``, ``GridSearchCV``); the arguments are
    checked here, not at the first call.

    Parameters
    ----------
    metric : {"chair_i", "chair_s", "recall", "precision", "f1"}, default="chair_i"
        Case-insensitive.
    vocabulary : sequence of str
        Object names to look for, as in :func:`chair`.
    synonyms : dict of str to str or None, default=None
        As in :func:`chair`.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``; extra keyword arguments go to
        ``predict``.

    See Also
    --------
    chair : All the metrics at once.

    Examples
    --------
    >>> from skicml.vlm import make_chair_scorer
    >>> class Captioner:
    ...     def predict(self, X):
    ...         return ["a red circle and a blue square"] * len(X)
    >>> scorer = make_chair_scorer("chair_i", vocabulary=["red circle", "blue square"])
    >>> scorer(Captioner(), [[0.0], [1.0]], [{"red circle"}, {"red circle", "blue square"}])
    -0.25
    """
    if not isinstance(metric, str) or metric.lower() not in _SCORER_SIGNS:
        raise ValueError(f"metric={metric!r}; expected one of {sorted(_SCORER_SIGNS)}.")
    vocabulary = _check_texts(vocabulary, "vocabulary")
    _Matcher(vocabulary, synonyms)  # validate now, not at the first call
    return _ChairScorer(metric.lower(), vocabulary, dict(synonyms) if synonyms is not None else None)


def _object_name_sets(objects, matcher, name="objects"):
    """Each image's ground-truth names as a set of canonical vocabulary names (CHAIR's and POPE's check)."""
    sets = []
    for i, gt in enumerate(objects):
        if isinstance(gt, (str, bytes)) or not np.iterable(gt):
            raise TypeError(f"{name}[{i}] must be a set or list of object names, got {type(gt).__name__}: {gt!r}.")
        names = set()
        for value in gt:
            if not isinstance(value, str):
                raise TypeError(f"{name}[{i}] holds {value!r}; object names must be str.")
            canonical = matcher.name(value)
            if canonical is None:
                raise ValueError(f"{name}[{i}] holds {value!r}, which is not a name of the vocabulary.")
            names.add(canonical)
        sets.append(names)
    return sets
