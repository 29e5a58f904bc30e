"""POPE: polling-based object probing, yes/no questions about objects (Li et al., EMNLP 2023).

POPE asks a vision-language model "Is there a <object> in the image?" for
objects that are in the image (answer yes) and as many that are not
(answer no), the absent ones sampled three ways: at random, among the most
frequent objects of the dataset (``"popular"``), or among the objects that
co-occur most with the ones in the image (``"adversarial"``, where a
language prior is the most tempting). :func:`pope_questions` builds the
questions from each image's ground-truth object names, :func:`pope_answers`
reads yes/no from free-text answers the way POPE's evaluation does,
:func:`caption_answers` answers the questions from captions instead (yes
when the image's caption mentions the object: a captioner with no
question-answering head, or a steered decoder, probed on what it writes),
and :func:`pope_score` gives accuracy, precision, recall, F1 and the share
of yes answers.
"""

import re
from collections import Counter

import numpy as np
import pandas as pd
from sklearn.utils import check_random_state

from ._chair import _check_texts, _Matcher, _object_name_sets

__all__ = ["caption_answers", "pope_answers", "pope_questions", "pope_score"]

#: The negative samplings of POPE.
POPE_SAMPLINGS = ("random", "popular", "adversarial")
#: POPE's question, the object name in place of ``{}``.
POPE_TEMPLATE = "Is there a {} in the image?"
_NO_WORDS = {"no", "not"}


def _check_truth(objects, matcher, name="objects"):
    """``objects`` as a list of sets of canonical vocabulary names, one per image."""
    if isinstance(objects, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of sets or lists of names, one per image, not a str.")
    return _object_name_sets(objects, matcher, name)


def pope_questions(objects, vocabulary, *, sampling="random", n_questions=3, statistics=None,
                   template=POPE_TEMPLATE, random_state=None):
    """POPE's balanced yes/no questions about the objects of each image.

    For each image, up to ``n_questions`` of its ground-truth objects (drawn
    at random when it has more; all of them otherwise) are asked about with
    answer yes, and as many absent objects with answer no, chosen by
    ``sampling`` as POPE chooses them:

    - ``"random"``: uniformly among the vocabulary names absent from the image;
    - ``"popular"``: the absent names that are most frequent in
      ``statistics`` (images where they occur);
    - ``"adversarial"``: the absent names that co-occur most with the image's
      objects in ``statistics`` (images holding both, summed over the
      image's objects).

    Ties in the two rankings are broken at random. Counting the statistics on
    the training distribution (e.g. scenes with a co-occurrence bias) makes
    the adversarial negatives the objects a model's language prior pulls in.

    Parameters
    ----------
    objects : sequence of sets or lists of str
        Per image, the names of the objects really in it: names of
        ``vocabulary`` (duplicates are ignored).
    vocabulary : sequence of str
        Object names that can be asked about, possibly of several words.
    sampling : {"random", "popular", "adversarial"}, default="random"
    n_questions : int, default=3
        Positive questions per image (POPE: 3), and as many negatives.
    statistics : sequence of sets or lists of str or None, default=None
        The images whose object frequencies and co-occurrences rank the
        ``"popular"`` and ``"adversarial"`` negatives; None is ``objects``.
    template : str, default="Is there a {} in the image?"
        The question, with ``{}`` where the object name goes.
    random_state : int, RandomState instance or None, default=None
        Seeds the choice of positives, random negatives and tie-breaking.

    Returns
    -------
    questions : pandas.DataFrame
        One row per question, images in order and, within an image, the
        positives first: ``sample`` (the image's index in ``objects``),
        ``object`` (vocabulary name), ``label`` (bool: True for yes),
        ``question`` (str) and ``sampling``.

    Raises
    ------
    TypeError
        If ``objects``, ``statistics`` or ``vocabulary`` is not what is
        described above.
    ValueError
        If ``sampling`` is unknown, ``n_questions`` is not a positive integer,
        ``template`` has no ``{}``, an object is not in the vocabulary, or an
        image holds every vocabulary name (nothing to ask a no about).

    See Also
    --------
    pope_score : Accuracy, precision, recall and F1 of the answers.
    caption_answers : Answers read from captions.

    Examples
    --------
    >>> from skicml.vlm import pope_questions
    >>> vocabulary = ["red circle", "blue square", "green cross", "red square"]
    >>> objects = [{"red circle"}, {"blue square", "green cross"}, {"blue square"}]
    >>> questions = pope_questions(objects, vocabulary, sampling="popular", n_questions=1, random_state=0)
    >>> questions[["sample", "object", "label"]].values.tolist()[:2]
    [[0, 'red circle', True], [0, 'blue square', False]]
    >>> questions["question"][0]
    'Is there a red circle in the image?'
    """
    if sampling not in POPE_SAMPLINGS:
        raise ValueError(f"sampling={sampling!r}; expected one of {POPE_SAMPLINGS}.")
    if isinstance(n_questions, bool) or not isinstance(n_questions, (int, np.integer)) or n_questions < 1:
        raise ValueError(f"n_questions={n_questions!r}; expected a positive integer.")
    if not isinstance(template, str) or "{}" not in template:
        raise ValueError(f"template={template!r}; expected a str with {{}} where the object name goes.")
    names = _check_texts(vocabulary, "vocabulary")
    matcher = _Matcher(names, None)
    truth = _check_truth(objects, matcher)
    reference = truth if statistics is None else _check_truth(statistics, matcher, "statistics")
    canonical = list(dict.fromkeys(matcher.name(n) for n in names))
    rng = check_random_state(random_state)

    frequency = Counter(name for gt in reference for name in gt)
    together = Counter((a, b) for gt in reference for a in gt for b in gt if a != b)
    rows = []
    for i, gt in enumerate(truth):
        present = [n for n in canonical if n in gt]
        absent = [n for n in canonical if n not in gt]
        if not absent:
            raise ValueError(f"objects[{i}] holds every name of the vocabulary: no object to ask a no about.")
        k = min(n_questions, len(present))
        positives = [present[j] for j in sorted(rng.choice(len(present), size=k, replace=False))] if k else []
        k = min(k, len(absent))
        order = rng.permutation(len(absent))  # random order: ties of the rankings broken at random
        shuffled = [absent[j] for j in order]
        if sampling == "random":
            negatives = shuffled[:k]
        else:
            if sampling == "popular":
                key = {n: frequency[n] for n in shuffled}
            else:
                key = {n: sum(together[(p, n)] for p in gt) for n in shuffled}
            negatives = sorted(shuffled, key=lambda n: -key[n])[:k]  # stable: shuffled order among ties
        for name, label in [(n, True) for n in positives] + [(n, False) for n in negatives]:
            rows.append({"sample": i, "object": name, "label": label, "question": template.format(name),
                         "sampling": sampling})
    frame = pd.DataFrame(rows, columns=["sample", "object", "label", "question", "sampling"])
    return frame.astype({"sample": int, "label": bool})


def pope_answers(texts):
    """Yes (True) or no (False) from free-text answers, by POPE's rule.

    As POPE's ``evaluate.py``: only the text before the first full stop is
    read, commas are dropped, and the answer is no when a word of it is
    "no" or "not" (case-insensitive here, where POPE checks "No", "no" and
    "not"), yes otherwise.

    Parameters
    ----------
    texts : sequence of str

    Returns
    -------
    ndarray of shape (n_texts,), dtype bool

    Examples
    --------
    >>> from skicml.vlm import pope_answers
    >>> pope_answers(["Yes, there is a red circle.", "No.", "There is not. No doubt", "yes. no"]).tolist()
    [True, False, False, True]
    """
    values = _check_texts(texts, "texts")
    answers = np.empty(len(values), dtype=bool)
    for i, text in enumerate(values):
        first = text.split(".")[0].replace(",", "")
        answers[i] = not (_NO_WORDS & set(re.findall(r"[^\W_]+", first.lower())))
    return answers


def caption_answers(captions, questions, vocabulary, *, synonyms=None):
    """Answers to POPE questions read from captions: yes when the image's caption mentions the object.

    The probe of a model that writes captions but answers no questions (or
    of a decoding method that steers captions): ``questions["object"]`` is
    looked for among the mentions (:func:`chair_mentions`) of the caption of
    image ``questions["sample"]``.

    Parameters
    ----------
    captions : sequence of str
        One caption per image, indexed by ``questions["sample"]``.
    questions : pandas.DataFrame
        As :func:`pope_questions` returns: ``sample`` and ``object`` columns.
    vocabulary : sequence of str
        The object names mentions are matched against, as in :func:`chair`.
    synonyms : dict of str to str or None, default=None

    Returns
    -------
    ndarray of shape (n_questions,), dtype bool

    Examples
    --------
    >>> from skicml.vlm import caption_answers, pope_questions
    >>> vocabulary = ["red circle", "blue square", "green cross"]
    >>> questions = pope_questions([{"red circle"}], vocabulary, n_questions=1, random_state=0)
    >>> caption_answers(["a red circle on the left"], questions, vocabulary).tolist()
    [True, False]
    """
    texts = _check_texts(captions, "captions")
    if not isinstance(questions, pd.DataFrame) or not {"sample", "object"} <= set(questions.columns):
        raise TypeError("questions must be a DataFrame with 'sample' and 'object' columns (pope_questions).")
    matcher = _Matcher(vocabulary, synonyms)
    samples = questions["sample"].to_numpy()
    if len(samples) and (samples.min() < 0 or samples.max() >= len(texts)):
        raise ValueError(f"questions ask about images 0..{samples.max()}, but there are {len(texts)} captions.")
    mentioned = {}
    answers = np.empty(len(questions), dtype=bool)
    for row, (sample, name) in enumerate(zip(samples, questions["object"])):
        canonical = matcher.name(str(name))
        if canonical is None:
            raise ValueError(f"questions ask about {name!r}, which is not a name of the vocabulary.")
        if sample not in mentioned:
            mentioned[sample] = set(matcher.mentions(texts[sample])[0])
        answers[row] = canonical in mentioned[sample]
    return answers


def _as_bools(values, name):
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of answers, not a single str.")
    values = list(values)
    if values and all(isinstance(v, str) for v in values):
        return pope_answers(values)
    out = np.empty(len(values), dtype=bool)
    for i, value in enumerate(values):
        if not isinstance(value, (bool, np.bool_)) and value not in (0, 1):
            raise TypeError(f"{name}[{i}] is {value!r}; expected booleans (True for yes) or answer texts.")
        out[i] = bool(value)
    return out


def pope_score(answers, labels):
    """POPE's metrics of yes/no answers: accuracy, precision, recall and F1 of "yes", and the yes ratio.

    Parameters
    ----------
    answers : sequence of bool or of str
        The model's answers: True for yes, or free texts read by
        :func:`pope_answers`.
    labels : sequence of bool
        The right answers (``pope_questions(...)["label"]``).

    Returns
    -------
    dict
        ``accuracy``, ``precision`` (of yes; 0 with no yes answer),
        ``recall``, ``f1`` (0 when precision and recall are both 0),
        ``yes_ratio`` (floats in [0, 1]) and ``n`` (int).

    Raises
    ------
    ValueError
        If there are no answers or ``answers`` and ``labels`` differ in length.

    Examples
    --------
    >>> from skicml.vlm import pope_score
    >>> scores = pope_score(["Yes.", "no", "Yes", "No, there is not."], [True, False, False, False])
    >>> scores["accuracy"], scores["precision"], scores["recall"], scores["yes_ratio"]
    (0.75, 0.5, 1.0, 0.5)
    """
    predicted, truth = _as_bools(answers, "answers"), _as_bools(labels, "labels")
    if not len(predicted):
        raise ValueError("answers is empty.")
    if len(predicted) != len(truth):
        raise ValueError(f"answers has {len(predicted)} entries but labels has {len(truth)}.")
    tp = int(np.sum(predicted & truth))
    fp = int(np.sum(predicted & ~truth))
    fn = int(np.sum(~predicted & truth))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"accuracy": float(np.mean(predicted == truth)), "precision": precision, "recall": recall, "f1": f1,
            "yes_ratio": float(np.mean(predicted)), "n": int(len(predicted))}
