"""Round trips on real graphs: QM9 and NCI molecules, networkx's classic networks."""

import networkx as nx
import numpy as np
import pytest

from skicml.datasets import load_nci_tpsa, load_qm9
from skicml.graph import EulerTokenizer, as_graph_list
from skicml.graph._chem import smiles_to_graphs


def _as_networkx(graph):
    out = nx.Graph()
    for node, row in enumerate(graph.x):
        out.add_node(node, x=row)
    for (u, v), row in zip(graph.edge_index.T, graph.edge_attr):
        out.add_edge(int(u), int(v), edge_attr=row)
    return out


def _assert_round_trip(graphs, seed, reindex="cyclic", node_scope=128):
    tokenizer = EulerTokenizer(node_scope=node_scope, reindex=reindex, random_state=seed).fit(graphs)
    decoded = tokenizer.inverse_transform(tokenizer.transform(graphs))
    for i, (graph, back) in enumerate(zip(graphs, decoded)):
        assert nx.is_isomorphic(
            _as_networkx(graph), back,
            node_match=lambda a, b: np.array_equal(a["x"], b["x"]),
            edge_match=lambda a, b: np.array_equal(a["edge_attr"], b["edge_attr"]),
        ), f"graph {i} does not survive the round trip"


@pytest.mark.parametrize("seed", [0, 1])
def test_qm9_molecules_round_trip(seed):
    smiles, _ = load_qm9(600, random_state=seed, return_X_y=True)
    _assert_round_trip(as_graph_list(smiles_to_graphs(list(smiles))), seed)


def test_nci_molecules_round_trip():
    # Larger drug-like molecules, some with several fragments (salts).
    frame = load_nci_tpsa()
    graphs = as_graph_list(smiles_to_graphs(list(frame["smiles"].iloc[:600])))
    assert max(g.num_nodes for g in graphs) > 30
    _assert_round_trip(graphs, seed=3, node_scope=256)


@pytest.mark.parametrize("name", ["karate_club_graph", "les_miserables_graph", "florentine_families_graph",
                                  "davis_southern_women_graph"])
def test_classic_networks_round_trip(name):
    graph = nx.convert_node_labels_to_integers(getattr(nx, name)())
    _assert_round_trip(as_graph_list([graph], node_attr=None, edge_attr=None), seed=0, reindex="sequential")
