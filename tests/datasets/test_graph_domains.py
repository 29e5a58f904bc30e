import numpy as np
import pytest

from skicml.datasets import make_graph_domains


def test_same_seed_same_domains_and_different_domains_differ():
    first = make_graph_domains(2, n_nodes=100, n_features=8, random_state=0)
    again = make_graph_domains(2, n_nodes=100, n_features=8, random_state=0)
    np.testing.assert_array_equal(first[1].x, again[1].x)
    np.testing.assert_array_equal(first[1].edge_index, again[1].edge_index)
    assert not np.allclose(first[0].class_embeddings, first[1].class_embeddings)


@pytest.mark.parametrize("homophily", [0.2, 0.9])
def test_edges_have_the_asked_homophily_and_degree(homophily):
    domain = make_graph_domains(1, n_nodes=3000, degree=8, homophily=homophily, random_state=0)[0]
    source, target = domain.edge_index
    assert (source < target).all()  # each undirected edge once, no self-loop
    same = (domain.node_labels[source] == domain.node_labels[target]).mean()
    # a different-class draw can still land in the class only when K = 1; K = 5 here
    assert abs(same - homophily) < 0.03
    assert 7.5 < 2 * len(source) / 3000 <= 8.0


@pytest.mark.parametrize("shift", [0.0, 1.0])
def test_class_embeddings_are_the_nearest_centroids_of_their_nodes(shift):
    domain = make_graph_domains(1, n_nodes=500, noise=0.3, domain_shift=shift, random_state=1)[0]
    x = domain.x / np.linalg.norm(domain.x, axis=1, keepdims=True)
    predicted = (x @ domain.class_embeddings.T).argmax(1)
    assert (predicted == domain.target).mean() > 0.95
    np.testing.assert_allclose(np.linalg.norm(domain.class_embeddings, axis=1), 1.0)


def test_a_domain_shift_moves_a_domain_away_from_the_others():
    def spread(shift):
        domains = make_graph_domains(4, n_nodes=200, domain_shift=shift, random_state=2)
        means = np.stack([d.x.mean(0) for d in domains])
        return np.linalg.norm(means - means.mean(0), axis=1).mean()

    assert spread(1.0) > 3 * spread(0.0)


def test_edge_tasks_label_each_edge_by_its_unordered_class_pair():
    domain = make_graph_domains(1, task="edge", n_nodes=300, n_classes=4, random_state=0)[0]
    assert domain.class_embeddings.shape[0] == 4 * 5 // 2
    labels = domain.node_labels
    np.testing.assert_array_equal(domain.pairs, domain.edge_index.T)
    key = {}
    for (u, v), t in zip(domain.pairs, domain.target):
        pair = tuple(sorted((labels[u], labels[v])))
        assert key.setdefault(pair, t) == t
    assert len(set(key.values())) == len(key)


def test_graph_tasks_are_labelled_by_their_majority_class():
    domain = make_graph_domains(1, task="graph", n_graphs=50, graph_size=(5, 12), n_classes=[3],
                                random_state=0)[0]
    assert len(domain.graphs) == len(domain.target) == 50
    assert len(domain.node_labels) == 50
    for graph, labels, target in zip(domain.graphs, domain.node_labels, domain.target):
        n = len(graph["x"])
        assert 5 <= n <= 12 and len(labels) == n and np.bincount(labels).argmax() == target
        assert graph["edge_index"].max() < n


def test_domains_may_have_their_own_class_counts_and_bad_settings_say_so():
    domains = make_graph_domains(3, n_nodes=50, n_classes=[2, 3, 4], random_state=0)
    assert [len(d.class_embeddings) for d in domains] == [2, 3, 4]
    with pytest.raises(ValueError, match="graph_size"):
        make_graph_domains(1, task="graph", graph_size=(1, 4))
    with pytest.raises(ValueError, match="at least 1"):
        make_graph_domains(2, n_classes=[3, 0])
