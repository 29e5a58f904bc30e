"""Tests of the CHAIR metric and its scikit-learn scorer (VISTA spec, sections 4.3 and 6, item 9)."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

from skicml.datasets import make_object_scenes, object_classes
from skicml.vlm import chair, chair_mentions, make_chair_scorer

VOCAB = ["red circle", "blue square", "green triangle", "yellow cross"]
KEYS = {"chair_s", "chair_i", "recall", "precision", "f1", "mean_length", "n_captions"}


def test_all_correct_captions_give_zero():
    captions = ["a red circle, to its right a blue square", "a large green triangle"]
    scores = chair(captions, [{"red circle", "blue square"}, {"green triangle"}], VOCAB)
    assert set(scores) == KEYS
    assert scores["chair_s"] == 0.0 and scores["chair_i"] == 0.0
    assert scores["recall"] == scores["precision"] == scores["f1"] == 1.0
    assert scores["n_captions"] == 2
    assert scores["mean_length"] == (9 + 4) / 2


def test_one_wrong_object_in_one_caption_of_two():
    captions = ["a red circle and a yellow cross", "a green triangle"]
    scores = chair(captions, [["red circle"], ["green triangle"]], VOCAB)
    assert scores["chair_s"] == 0.5
    assert scores["chair_i"] == pytest.approx(1 / 3)
    assert scores["recall"] == 1.0
    assert scores["precision"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx(2 * (2 / 3) / (1 + 2 / 3))


def test_empty_captions_give_zero_chair_i_not_nan():
    scores = chair(["", "   ", "nothing here."], [{"red circle"}, {"blue square"}, set()], VOCAB)
    assert scores["chair_i"] == 0.0 and scores["chair_s"] == 0.0
    assert scores["precision"] == 1.0  # documented: nothing mentioned, nothing wrong
    assert scores["recall"] == 0.0 and scores["f1"] == 0.0
    assert all(np.isfinite(v) for v in scores.values())
    # no ground-truth objects and no mentions at all
    nothing = chair([""], [[]], VOCAB)
    assert nothing["recall"] == 1.0 and nothing["precision"] == 1.0 and nothing["f1"] == 1.0


def test_synonyms_collapse_to_the_vocabulary_name():
    synonyms = {"crimson ball": "red circle", "azure box": "blue square", "circle of red": "red circle"}
    assert chair_mentions("A crimson ball; an azure box; a circle of red.", VOCAB, synonyms) == [
        "red circle", "blue square", "red circle",
    ]
    scores = chair(["a crimson ball and an azure box"], [{"red circle", "blue square"}], VOCAB, synonyms=synonyms)
    assert scores["chair_i"] == 0.0 and scores["recall"] == 1.0
    # the ground truth may be written with synonyms too
    assert chair(["a red circle"], [{"crimson ball"}], VOCAB, synonyms=synonyms)["chair_i"] == 0.0
    # without the synonyms, nothing is found
    assert chair(["a crimson ball"], [{"red circle"}], VOCAB)["recall"] == 0.0


def test_longest_match_first_and_no_word_counted_twice():
    vocab = ["red circle", "dark red circle", "circle", "red"]
    assert chair_mentions("a dark red circle", vocab) == ["dark red circle"]
    assert chair_mentions("a red circle", vocab) == ["red circle"]
    assert chair_mentions("red, circle", vocab) == ["red circle"]  # punctuation-insensitive
    assert chair_mentions("red red circle circle", vocab) == ["red", "red circle", "circle"]
    assert chair_mentions("a dark red circle next to a circle", vocab) == ["dark red circle", "circle"]
    # whole words only
    assert chair_mentions("a redcircle, a circles, a red circlet", vocab) == ["red"]
    scores = chair(["a dark red circle"], [{"red circle"}], vocab)
    assert scores["chair_i"] == 1.0 and scores["recall"] == 0.0


def test_case_and_punctuation_insensitive():
    assert chair_mentions("RED Circle!! ...blue-square", VOCAB) == ["red circle", "blue square"]
    assert chair_mentions("a red circle", ["Red  Circle"]) == ["Red  Circle"]


def test_repeated_mentions_count_per_mention_in_chair_i_and_once_in_recall():
    captions = ["a yellow cross, a yellow cross, a yellow cross and a red circle, a red circle"]
    scores = chair(captions, [{"red circle", "blue square"}], VOCAB)
    assert scores["chair_i"] == pytest.approx(3 / 5)
    assert scores["recall"] == 0.5  # red circle covered once of {red circle, blue square}
    assert scores["precision"] == 0.5  # distinct: red circle (right), yellow cross (wrong)
    assert scores["chair_s"] == 1.0


def test_ratios_pool_over_captions():
    captions = ["a red circle", "a blue square and a yellow cross and a green triangle"]
    truth = [{"red circle", "green triangle"}, {"blue square"}]
    scores = chair(captions, truth, VOCAB)
    assert scores["chair_i"] == pytest.approx(2 / 4)  # not the mean of 0 and 2/3
    assert scores["recall"] == pytest.approx(2 / 3)
    assert scores["precision"] == pytest.approx(2 / 4)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(VOCAB), max_size=5), st.sets(st.sampled_from(VOCAB))),
                min_size=1, max_size=6))
def test_counts_match_a_direct_computation(cases):
    captions = [", ".join(f"a {name}" for name in said) for said, _ in cases]
    truth = [gt for _, gt in cases]
    scores = chair(captions, truth, VOCAB)
    mentions = sum(len(said) for said, _ in cases)
    wrong = sum(name not in gt for said, gt in cases for name in said)
    assert scores["chair_i"] == pytest.approx(wrong / mentions if mentions else 0.0)
    assert scores["chair_s"] == pytest.approx(np.mean([any(n not in gt for n in said) for said, gt in cases]))
    for key in ("chair_s", "chair_i", "recall", "precision", "f1"):
        assert 0.0 <= scores[key] <= 1.0


def test_generated_scenes_score_perfectly_with_their_own_captions():
    _, captions, objects = make_object_scenes(50, random_state=0)
    truth = objects.groupby("scene")["name"].agg(set)
    scores = chair(captions, truth, object_classes())
    assert scores["chair_i"] == 0.0 and scores["chair_s"] == 0.0 and scores["recall"] == 1.0
    # captions of other scenes hallucinate
    shifted = chair(np.roll(captions, 1), truth, object_classes())
    assert shifted["chair_i"] > 0.5 and shifted["chair_s"] > 0.9


@pytest.mark.parametrize("call, error, match", [
    (lambda: chair(["a red circle"], [{"red circle"}, set()], VOCAB), ValueError, "objects has 2 entries"),
    (lambda: chair([], [], VOCAB), ValueError, "captions is empty"),
    (lambda: chair("a red circle", [{"red circle"}], VOCAB), TypeError, "captions must be a sequence of str"),
    (lambda: chair(["a red circle", 3], [set(), set()], VOCAB), TypeError, r"captions\[1\]"),
    (lambda: chair(["a red circle"], [{"red circle"}], []), ValueError, "vocabulary is empty"),
    (lambda: chair(["a red circle"], [{"red circle"}], "red circle"), TypeError, "vocabulary"),
    (lambda: chair(["a red circle"], [{"red circle"}], ["red circle", "!"]), ValueError, "vocabulary holds '!'"),
    (lambda: chair(["a red circle"], ["red circle"], VOCAB), TypeError, r"objects\[0\]"),
    (lambda: chair(["a red circle"], [{"purple circle"}], VOCAB), ValueError, r"objects\[0\] holds 'purple"),
    (lambda: chair(["a red circle"], [{1}], VOCAB), TypeError, r"objects\[0\]"),
    (lambda: chair(["x"], [set()], VOCAB, synonyms={"ball": "orb"}), ValueError, "not in the vocabulary"),
    (lambda: chair(["x"], [set()], VOCAB, synonyms={"blue square": "red circle"}), ValueError, "already names"),
    (lambda: chair(["x"], [set()], VOCAB, synonyms=["ball"]), TypeError, "synonyms"),
    (lambda: chair_mentions(None, VOCAB), TypeError, "caption must be a str"),
])
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


class FixedCaptioner(BaseEstimator):
    """Captions looked up by the first feature of each row: a stand-in for a VLM."""

    def __init__(self, captions=("",), shift=0):
        self.captions = captions
        self.shift = shift

    def fit(self, X, y=None):
        return self

    def predict(self, X):
        index = (np.asarray(X)[:, 0].astype(int) + self.shift) % len(self.captions)
        return [self.captions[i] for i in index]


class DuckCaptioner:
    """Only a ``predict`` method, no scikit-learn base class."""

    def predict(self, X):
        return ["a red circle and a blue square"] * len(X)


def test_scorer_signs_make_greater_better():
    X, y = [[0], [1]], [{"red circle"}, {"red circle", "blue square"}]
    values = {m: make_chair_scorer(m, vocabulary=VOCAB)(DuckCaptioner(), X, y)
              for m in ("chair_i", "chair_s", "recall", "precision", "f1")}
    assert values["chair_i"] == -0.25 and values["chair_s"] == -0.5
    assert values["recall"] == 1.0 and values["precision"] == 0.75
    assert values["f1"] == pytest.approx(2 * 0.75 / 1.75)
    perfect = make_chair_scorer(vocabulary=VOCAB)(DuckCaptioner(), X, [{"red circle", "blue square"}] * 2)
    assert perfect == 0.0 and np.copysign(1.0, perfect) == 1.0  # 0.0, not -0.0
    assert make_chair_scorer("CHAIR_S", vocabulary=VOCAB)(DuckCaptioner(), X, y) == -0.5


def test_scorer_in_cross_val_score_and_grid_search():
    _, captions, objects = make_object_scenes(12, random_state=0)
    truth = list(objects.groupby("scene")["name"].agg(set))
    X = np.arange(12)[:, None]
    scorer = make_chair_scorer("chair_i", vocabulary=object_classes())
    right = cross_val_score(FixedCaptioner(tuple(captions)), X, truth, scoring=scorer, cv=KFold(3))
    np.testing.assert_array_equal(right, 0.0)
    wrong = cross_val_score(FixedCaptioner(tuple(captions), shift=1), X, truth, scoring=scorer, cv=KFold(3))
    assert np.all(wrong < -0.3)
    search = GridSearchCV(FixedCaptioner(tuple(captions)), {"shift": [2, 0, 1]}, scoring=scorer, cv=KFold(3))
    assert search.fit(X, truth).best_params_ == {"shift": 0}


def test_scorer_arguments_are_checked_up_front_and_it_pickles():
    with pytest.raises(ValueError, match="metric='bleu'"):
        make_chair_scorer("bleu", vocabulary=VOCAB)
    with pytest.raises(ValueError, match="metric=None"):
        make_chair_scorer(None, vocabulary=VOCAB)
    with pytest.raises(ValueError, match="vocabulary is empty"):
        make_chair_scorer(vocabulary=[])
    with pytest.raises(ValueError, match="not in the vocabulary"):
        make_chair_scorer(vocabulary=VOCAB, synonyms={"ball": "orb"})
    with pytest.raises(TypeError):
        make_chair_scorer()  # the vocabulary is required
    scorer = make_chair_scorer("f1", vocabulary=iter(VOCAB), synonyms={"crimson ball": "red circle"})
    assert "f1" in repr(scorer)
    copy = pickle.loads(pickle.dumps(scorer))
    assert copy(DuckCaptioner(), [[0]], [{"red circle", "blue square"}]) == 1.0
    with pytest.raises(ValueError, match="needs y"):
        scorer(DuckCaptioner(), [[0]], None)
