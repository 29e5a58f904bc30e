"""POPE's yes/no probe: balanced questions with random, popular and adversarial negatives, and its metrics."""

import numpy as np
import pandas as pd
import pytest

from skicml.datasets import make_free_object_scenes, object_classes, object_partners
from skicml.vlm import caption_answers, pope_answers, pope_questions, pope_score

VOCABULARY = ["red circle", "blue square", "green cross", "red square", "blue circle"]


@pytest.fixture(scope="module")
def biased():
    """Free scenes where every drawn class pulls its partner in: the statistics of a language prior."""
    _, _, objects = make_free_object_scenes(120, cooccurrence=1.0, random_state=0)
    return objects.groupby("scene")["name"].apply(set).tolist()


@pytest.mark.parametrize("sampling", ["random", "popular", "adversarial"])
def test_questions_are_balanced_and_labelled_by_the_truth(biased, sampling):
    questions = pope_questions(biased, object_classes(), sampling=sampling, random_state=0)
    assert list(questions.columns) == ["sample", "object", "label", "question", "sampling"]
    per_image = questions.groupby("sample")["label"].agg(["sum", "size"])
    assert (per_image["sum"] == 3).all() and (per_image["size"] == 6).all()  # 5-7 objects: 3 yes and 3 no
    assert all((name in biased[s]) == label for s, name, label in questions[["sample", "object", "label"]].values)
    assert not questions.duplicated(["sample", "object"]).any()
    assert questions["question"].iloc[0] == f"Is there a {questions['object'].iloc[0]} in the image?"


def test_popular_negatives_are_the_most_frequent_absent_objects():
    objects = [{"red circle"}, {"blue square", "green cross"}, {"blue square"}, {"green cross", "red circle"}]
    questions = pope_questions(objects, VOCABULARY, sampling="popular", n_questions=1, random_state=0)
    negatives = questions[~questions["label"]].set_index("sample")["object"]
    # frequencies: red circle 2, blue square 2, green cross 2, red square 0, blue circle 0
    assert negatives[0] in {"blue square", "green cross"} and negatives[2] in {"red circle", "green cross"}
    assert not negatives.isin(["red square", "blue circle"]).any()


def test_adversarial_negatives_are_the_partners_a_prior_pulls_in(biased):
    # Unbiased test scenes, asked with the biased scenes' co-occurrences: the adversarial negatives are the
    # present objects' partners far more often than random negatives are.
    _, _, objects = make_free_object_scenes(60, cooccurrence=0.0, random_state=1)
    test = objects.groupby("scene")["name"].apply(set).tolist()
    partners = object_partners()

    def partner_share(sampling):
        questions = pope_questions(test, object_classes(), sampling=sampling, statistics=biased, random_state=0)
        negatives = questions[~questions["label"]]
        return np.mean([name in {partners[p] for p in test[s]} | {k for k, v in partners.items() if v in test[s]}
                        for s, name in zip(negatives["sample"], negatives["object"])])

    adversarial, random = partner_share("adversarial"), partner_share("random")
    assert adversarial > 0.8 and adversarial > random + 0.3, (adversarial, random)


def test_fewer_objects_than_questions_and_seeding():
    questions = pope_questions([{"red circle"}, set()], VOCABULARY, n_questions=3, random_state=0)
    assert questions["sample"].tolist() == [0, 0]  # one yes, one no; an empty image gets no question
    again = pope_questions([{"red circle"}, set()], VOCABULARY, n_questions=3, random_state=0)
    pd.testing.assert_frame_equal(questions, again)


def test_answers_follow_popes_rule():
    texts = ["Yes, there is.", "No", "There is NOT a circle", "yes. no", "Nope, maybe", "no, it is not"]
    assert pope_answers(texts).tolist() == [True, False, False, True, True, False]


def test_caption_answers_read_mentions():
    questions = pope_questions([{"red circle", "blue square"}], VOCABULARY, n_questions=2, random_state=0)
    answers = caption_answers(["a red circle , then a red square"], questions, VOCABULARY)
    expected = [name in {"red circle", "red square"} for name in questions["object"]]
    assert answers.tolist() == expected


def test_score_counts_yes_as_positive():
    scores = pope_score([True, True, False, False, True], [True, False, False, True, True])
    assert scores == {"accuracy": 0.6, "precision": 2 / 3, "recall": 2 / 3, "f1": pytest.approx(2 / 3),
                      "yes_ratio": 0.6, "n": 5}
    assert pope_score(["no", "no"], [True, False])["f1"] == 0.0


@pytest.mark.parametrize("call, match", [
    (lambda: pope_questions([{"red circle"}], VOCABULARY, sampling="hard"), "sampling"),
    (lambda: pope_questions([{"red circle"}], VOCABULARY, n_questions=0), "n_questions"),
    (lambda: pope_questions([{"red circle"}], VOCABULARY, template="Is it there?"), "template"),
    (lambda: pope_questions([{"purple cross"}], VOCABULARY), "not a name"),
    (lambda: pope_questions([set(VOCABULARY)], VOCABULARY), "every name"),
    (lambda: pope_score([True], [True, False]), "labels has 2"),
    (lambda: pope_score([], []), "empty"),
])
def test_invalid_arguments_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_invalid_types_are_refused():
    with pytest.raises(TypeError, match="not a str"):
        pope_questions("red circle", VOCABULARY)
    with pytest.raises(TypeError, match="booleans"):
        pope_score([2, 0], [True, False])
    with pytest.raises(TypeError, match="DataFrame"):
        caption_answers(["a red circle"], [{"sample": 0, "object": "red circle"}], VOCABULARY)
