"""EulerTokenizer: lossless round trips, re-indexing, determinism, vocabulary,
input formats and errors (GraphGPT spec, section 6, properties 4-8)."""

import pickle
import warnings

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from skicml.graph import EulerTokenizer, as_graph_list, pad_sequences
from skicml.graph._chem import smiles_to_graph
from skicml.graph._graphgpt._tokenizer import EDGE, EOS, JUMP, SPECIAL_TOKENS, START

N_SPECIAL = len(SPECIAL_TOKENS)


# ----------------------------------------------------------------- helpers
def _attr(data, key):
    return np.atleast_1d(np.asarray(data.get(key, np.zeros(0)), dtype=np.float64)).ravel()


def _same_attributes(key):
    return lambda a, b: np.array_equal(_attr(a, key), _attr(b, key))


def assert_same_graph(original, decoded):
    assert decoded.number_of_nodes() == original.number_of_nodes()
    assert decoded.number_of_edges() == original.number_of_edges()
    assert nx.is_isomorphic(original, decoded, node_match=_same_attributes("x"),
                            edge_match=_same_attributes("edge_attr"))


def _index_columns(sequence):
    """Index ids (0..scope-1) of the walk rows of one sequence."""
    rows = sequence[sequence[:, 0] >= N_SPECIAL]
    return rows[:, 0] - N_SPECIAL


def _first_appearances(sequence):
    ids = _index_columns(sequence)
    _, first = np.unique(ids, return_index=True)
    return ids[np.sort(first)]


@st.composite
def graph_batches(draw, max_nodes=30):
    """1-4 undirected simple graphs sharing one layout: random edge sets
    (disconnected, isolated nodes and self-loops included) or trees, cycles
    and complete graphs, with integer node and edge attributes."""
    n_node_attr = draw(st.integers(0, 2))
    n_edge_attr = draw(st.integers(0, 2))
    graphs = []
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, max_nodes))
        kind = draw(st.sampled_from(["random", "random", "tree", "cycle", "complete"]))
        if kind == "random":
            pairs = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))
            graph = nx.Graph()
            graph.add_nodes_from(range(n))
            graph.add_edges_from(draw(st.lists(pairs, max_size=2 * n)))
        elif kind == "tree":
            graph = nx.random_labeled_tree(n, seed=draw(st.integers(0, 1000))) if n > 1 else nx.empty_graph(1)
        elif kind == "cycle":
            graph = nx.cycle_graph(n)
        else:
            graph = nx.complete_graph(min(n, 8))
        values = st.integers(-3, 5)
        for node in graph.nodes:
            if n_node_attr:
                graph.nodes[node]["x"] = np.array(draw(st.lists(values, min_size=n_node_attr,
                                                                max_size=n_node_attr)))
        for u, v in graph.edges:
            if n_edge_attr:
                graph.edges[u, v]["edge_attr"] = np.array(draw(st.lists(values, min_size=n_edge_attr,
                                                                         max_size=n_edge_attr)))
        graphs.append(graph)
    return graphs


def _triangle_with_tail(x=(1, 2, 3, 4), edge=(7, 8, 7, 9)):
    graph = nx.Graph()
    for node, value in enumerate(x):
        graph.add_node(node, x=value)
    for (u, v), value in zip([(0, 1), (1, 2), (2, 0), (2, 3)], edge):
        graph.add_edge(u, v, edge_attr=value)
    return graph


@pytest.fixture(scope="module")
def atlas():
    return [g for g in nx.graph_atlas_g() if g.number_of_nodes() > 0]


# -------------------------------------------------------------- round trip
@settings(max_examples=40, deadline=None)
@given(graphs=graph_batches())
def test_round_trip_is_lossless(graphs):
    for reindex in ("cyclic", "sequential"):
        for seed in (0, 1, 2):
            tokenizer = EulerTokenizer(node_scope=32, reindex=reindex, random_state=seed).fit(graphs)
            sequences = tokenizer.transform(graphs)
            assert len(sequences) == len(graphs)
            for graph, sequence, decoded in zip(graphs, sequences, tokenizer.inverse_transform(sequences)):
                assert sequence.shape[1] == tokenizer.n_stacked_
                # One row per step of a walk covering every edge, plus <eos>.
                assert len(sequence) >= graph.number_of_edges() + 2
                assert len(sequence) <= graph.number_of_edges() + graph.number_of_nodes() + 1
                assert_same_graph(graph, decoded)


@settings(max_examples=40, deadline=None)
@given(graphs=graph_batches())
def test_reindexing(graphs):
    scope = 32
    sequential = EulerTokenizer(node_scope=scope, reindex="sequential", random_state=3).fit(graphs)
    cyclic = EulerTokenizer(node_scope=scope, reindex="cyclic", random_state=3).fit(graphs)
    for graph, seq_s, seq_c in zip(graphs, sequential.transform(graphs), cyclic.transform(graphs)):
        n = graph.number_of_nodes()
        np.testing.assert_array_equal(_first_appearances(seq_s), np.arange(n))
        first = _first_appearances(seq_c)
        np.testing.assert_array_equal(first, (first[0] + np.arange(n)) % scope)
        # The same walk: only the index column moves, by the offset r.
        np.testing.assert_array_equal(seq_c[:, 1:], seq_s[:, 1:])
        np.testing.assert_array_equal(_index_columns(seq_c), (_index_columns(seq_s) + first[0]) % scope)


def test_round_trip_of_every_small_graph(atlas):
    # All 1252 non-empty graphs of up to 7 nodes, in one batch.
    for reindex, seed in (("cyclic", 0), ("sequential", 1)):
        tokenizer = EulerTokenizer(node_scope=7, reindex=reindex, random_state=seed).fit(atlas)
        decoded = tokenizer.inverse_transform(tokenizer.transform(atlas))
        for graph, back in zip(atlas, decoded):
            assert_same_graph(graph, back)


def test_cyclic_offset_is_uniform_over_the_scope():
    scope, n_seeds = 8, 400
    graph = [_triangle_with_tail()]
    offsets = [_first_appearances(EulerTokenizer(node_scope=scope, random_state=seed).fit_transform(graph)[0])[0]
               for seed in range(n_seeds)]
    counts = np.bincount(offsets, minlength=scope)
    assert len(counts) == scope
    assert stats.chisquare(counts).pvalue > 1e-3
    # Decoding never depends on r: shifting the index column changes nothing.
    tokenizer = EulerTokenizer(node_scope=scope, random_state=0).fit(graph)
    sequence = tokenizer.transform(graph)[0]
    shifted = sequence.copy()
    walk = shifted[:, 0] >= N_SPECIAL
    shifted[walk, 0] = N_SPECIAL + (shifted[walk, 0] - N_SPECIAL + 5) % scope
    a, b = tokenizer.inverse_transform([sequence, shifted])
    assert list(a.edges) == list(b.edges)
    for node in a.nodes:
        np.testing.assert_array_equal(a.nodes[node]["x"], b.nodes[node]["x"])


def test_seeds_give_different_walks():
    graph = [nx.petersen_graph()]
    walks = {EulerTokenizer(reindex="sequential", random_state=seed).fit_transform(graph)[0].tobytes()
             for seed in range(10)}
    assert len(walks) > 1


# ------------------------------------------------------------ determinism
def test_same_seed_same_tokens_and_fit_transform(atlas):
    graphs = atlas[::20]
    a = EulerTokenizer(node_scope=7, random_state=42).fit(graphs).transform(graphs)
    b = EulerTokenizer(node_scope=7, random_state=42).fit_transform(graphs)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    c = EulerTokenizer(node_scope=7, random_state=43).fit_transform(graphs)
    assert any(not np.array_equal(x, y) for x, y in zip(a, c))


def test_tokens_do_not_depend_on_the_other_graphs(atlas):
    graph = _triangle_with_tail()
    others = [_triangle_with_tail(x=(5, 5, 5, 5)), _triangle_with_tail(edge=(1, 1, 1, 1))]
    tokenizer = EulerTokenizer(random_state=0).fit([graph] + others)
    alone = tokenizer.transform([graph])[0]
    np.testing.assert_array_equal(tokenizer.transform(others + [graph])[-1], alone)
    np.testing.assert_array_equal(tokenizer.transform([others[0], graph, others[1]])[1], alone)
    # Refitting on a different set with the same vocabulary gives the same walk.
    refit = EulerTokenizer(random_state=0).fit(others[::-1] + [graph])
    np.testing.assert_array_equal(refit.transform([graph])[0], alone)


# -------------------------------------------------------------- vocabulary
def test_vocabulary_is_contiguous_and_every_id_fits(atlas):
    graphs = [_triangle_with_tail(), _triangle_with_tail(x=(0, 0, 9, 9), edge=(3, 3, 4, 4)), nx.Graph()]
    graphs[2].add_node(0, x=1)
    tokenizer = EulerTokenizer(node_scope=10, random_state=0).fit(graphs)
    assert sorted(tokenizer.vocab_.values()) == list(range(tokenizer.vocab_size_))
    assert tokenizer.vocab_["<pad>"] == 0
    assert all(tokenizer.id_to_token_[i] == token for token, i in tokenizer.vocab_.items())
    assert tokenizer.n_stacked_ == 4 and tokenizer.n_node_attributes_ == 1 and tokenizer.n_edge_attributes_ == 1
    tokens = np.concatenate(list(tokenizer.transform(graphs)))
    assert tokens.min() >= 1 and tokens.max() < tokenizer.vocab_size_
    names = np.array(tokenizer.id_to_token_)
    assert all(t.startswith("index:") or t == "<eos>" for t in names[tokens[:, 0]])
    assert all(t.startswith("node0:") for t in names[tokens[:, 1]])
    assert all(t.startswith("edge0:") for t in names[tokens[:, 2]])
    assert set(tokens[:, 3]) <= {EOS, START, EDGE, JUMP}
    # The isolated node is a component of its own: one <start> row, then <eos>.
    np.testing.assert_array_equal(tokenizer.transform(graphs[2:])[0][:, 3], [START, EOS])


def test_unseen_values_get_the_default_token():
    tokenizer = EulerTokenizer(random_state=0).fit([_triangle_with_tail()])
    sequence = tokenizer.transform([_triangle_with_tail(x=(1, 2, 3, 99), edge=(7, 8, 7, -5))])[0]
    names = np.array(tokenizer.id_to_token_)
    assert (names[sequence[:-1, 1]] == "node0:?").sum() >= 1
    assert "edge0:?" in set(names[sequence[sequence[:, 3] == EDGE, 2]])
    decoded = tokenizer.inverse_transform([sequence])[0]
    # Scalar attributes come back as scalars; the default token as NaN.
    values = np.array([decoded.nodes[n]["x"] for n in decoded.nodes])
    assert np.isnan(values).sum() == 1 and sorted(values[~np.isnan(values)]) == [1.0, 2.0, 3.0]


def test_float_attributes_are_binned_to_bin_means():
    rng = np.random.RandomState(0)
    n = 60
    values = rng.lognormal(size=n)
    graph = nx.path_graph(n)
    for node in graph.nodes:
        graph.nodes[node]["x"] = [node, values[node]]  # column 0 names the node
    tokenizer = EulerTokenizer(n_bins=4, random_state=0).fit([graph])
    decoded = tokenizer.inverse_transform(tokenizer.transform([graph]))[0]
    pairs = np.array([decoded.nodes[node]["x"] for node in decoded.nodes])
    original_id, binned = pairs[:, 0].astype(int), pairs[:, 1]
    original = values[original_id]
    assert len(np.unique(binned)) == 4
    for mean in np.unique(binned):
        np.testing.assert_allclose(mean, original[binned == mean].mean())
    # Bins are intervals: the order of the values is kept.
    assert np.all(np.diff(binned[np.argsort(original)]) >= 0)
    assert nx.is_isomorphic(decoded, graph)


def test_float_bins_are_never_empty():
    # Interpolated quantiles of [0.1, 1.1, 2.1, 3.1, 100.1] fall in the gap
    # between 3.1 and 100.1: those bins must not become NaN tokens.
    values = [0.1, 1.1, 2.1, 3.1, 100.1]
    graph = nx.path_graph(5)
    for node, value in enumerate(values):
        graph.nodes[node]["x"] = value
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tokenizer = EulerTokenizer(random_state=0).fit([graph])
    new = nx.path_graph(3)
    for node, value in enumerate([40.0, 60.0, 99.0]):
        new.nodes[node]["x"] = value
    decoded = tokenizer.inverse_transform(tokenizer.transform([graph, new]))
    assert sorted(float(decoded[0].nodes[n]["x"]) for n in decoded[0]) == values
    new_values = [float(decoded[1].nodes[n]["x"]) for n in decoded[1]]
    assert np.isfinite(new_values).all() and set(new_values) <= set(values)


# --------------------------------------------------------- the 2-D path
def test_feature_matrix_path():
    rng = np.random.RandomState(0)
    X = rng.randint(-5, 5, size=(6, 5)).astype(float)
    tokenizer = EulerTokenizer(random_state=0).fit(X)
    Xt = tokenizer.transform(X)
    assert tokenizer.n_features_in_ == 5 and tokenizer.n_stacked_ == 4
    assert Xt.shape == (6, 2 * 5 * 4) and Xt.dtype == np.int64
    np.testing.assert_array_equal(EulerTokenizer(random_state=0).fit_transform(X), Xt)
    for row, graph in zip(X, tokenizer.inverse_transform(Xt)):
        assert nx.is_isomorphic(graph, nx.path_graph(5))
        feature = {node: int(graph.nodes[node]["x"][0]) for node in graph}
        by_feature = {f: node for node, f in feature.items()}
        assert sorted(by_feature) == list(range(5))
        # The path links feature j to feature j+1, and carries its value.
        assert all(graph.has_edge(by_feature[j], by_feature[j + 1]) for j in range(4))
        np.testing.assert_array_equal([graph.nodes[by_feature[j]]["x"][1] for j in range(5)], row)
    with pytest.raises(ValueError, match="multiple of n_stacked_=4"):
        tokenizer.inverse_transform(Xt[:, :-1])


# ---------------------------------------------------------------- inputs
def test_networkx_with_string_node_ids():
    graph = nx.relabel_nodes(_triangle_with_tail(), {0: "carbon", 1: "oxygen", 2: ("tuple", 1), 3: "h"})
    tokenizer = EulerTokenizer(random_state=0).fit([graph])
    assert_same_graph(graph, tokenizer.inverse_transform(tokenizer.transform([graph]))[0])


def test_torch_geometric_data_and_dicts():
    from torch_geometric.data import Data

    graph = _triangle_with_tail()
    one_way = np.array([[0, 1, 2, 2], [1, 2, 0, 3]])
    edge_attr = np.array([7, 8, 7, 9])
    x = np.array([[1], [2], [3], [4]])
    both_ways = np.concatenate([one_way, one_way[::-1]], axis=1)
    data = Data(x=torch.tensor(x), edge_index=torch.tensor(both_ways),
                edge_attr=torch.tensor(np.r_[edge_attr, edge_attr]).unsqueeze(1))
    record = {"edge_index": one_way, "x": x, "edge_attr": edge_attr}
    converted = as_graph_list([data, record, graph])
    assert [g.n_edges for g in converted] == [4, 4, 4]  # PyG's two directions kept once
    tokenizer = EulerTokenizer(random_state=0).fit([data, record])
    sequences = tokenizer.transform([data, record, graph])
    np.testing.assert_array_equal(sequences[0], sequences[1])
    for decoded in tokenizer.inverse_transform(sequences):
        assert_same_graph(graph, decoded)


def test_smiles():
    smiles = ["CCO", "c1ccccc1", "[Na+].[Cl-]"]
    tokenizer = EulerTokenizer(random_state=0).fit(smiles)
    records = [smiles_to_graph(s) for s in smiles]
    assert tokenizer.n_node_attributes_ == records[0]["x"].shape[1]
    assert tokenizer.n_edge_attributes_ == records[0]["edge_attr"].shape[1]
    for record, decoded in zip(records, tokenizer.inverse_transform(tokenizer.transform(smiles))):
        original = nx.Graph()
        for node, row in enumerate(record["x"]):
            original.add_node(node, x=row)
        for (u, v), row in zip(record["edge_index"].T, record["edge_attr"]):
            original.add_edge(int(u), int(v), edge_attr=row)
        assert_same_graph(original, decoded)
    assert nx.number_connected_components(tokenizer.inverse_transform(tokenizer.transform(smiles[2:]))[0]) == 2


def test_state_and_pickle_round_trips(atlas):
    graphs = [_triangle_with_tail(), _triangle_with_tail(x=(0, 1, 0, 1))]
    tokenizer = EulerTokenizer(node_scope=12, n_bins=3, random_state=5).fit(graphs)
    for restored in (EulerTokenizer.from_state(tokenizer.get_state()), pickle.loads(pickle.dumps(tokenizer))):
        assert restored.vocab_ == tokenizer.vocab_ and restored.get_params() == tokenizer.get_params()
        for a, b in zip(restored.transform(graphs), tokenizer.transform(graphs)):
            np.testing.assert_array_equal(a, b)
    floats = np.random.RandomState(0).rand(5, 3)
    tokenizer = EulerTokenizer(random_state=0).fit(floats)
    restored = EulerTokenizer.from_state(tokenizer.get_state())
    assert restored.id_to_token_ == tokenizer.id_to_token_
    # A restored tokenizer reads graphs; its bins are those of the fit.
    graphs = tokenizer.inverse_transform(tokenizer.transform(floats))
    for a, b in zip(restored.transform(graphs), tokenizer.transform(graphs)):
        np.testing.assert_array_equal(a, b)


def test_pad_sequences():
    tokenizer = EulerTokenizer(random_state=0).fit([nx.path_graph(2), nx.path_graph(5)])
    sequences = tokenizer.transform([nx.path_graph(2), nx.path_graph(5)])
    padded = pad_sequences(sequences)
    assert padded.shape == (2, max(map(len, sequences)), 2)
    assert (padded[0, len(sequences[0]):] == 0).all()
    decoded = tokenizer.inverse_transform(padded)  # pad rows are ignored
    assert [g.number_of_nodes() for g in decoded] == [2, 5]
    with pytest.raises(ValueError, match="max_len=3"):
        pad_sequences(sequences, max_len=3)


# ---------------------------------------------------------------- errors
def test_bad_graphs_are_rejected_with_clear_messages():
    tokenizer = EulerTokenizer()
    cases = [
        ([], "no graphs"),
        ([nx.path_graph(2), nx.Graph()], "graph 1 of X has no nodes"),
        ([nx.path_graph(70)], "70 nodes, more than node_scope=64"),
        ([nx.DiGraph([(0, 1)])], "directed graph"),
        ([nx.MultiGraph([(0, 1), (0, 1)])], "multigraph"),
        ([{"edge_index": np.array([[0, 1, 0], [1, 0, 1]])}], "parallel edges"),
        ([_triangle_with_tail(x=(1, np.nan, 3, 4))], "x contains NaN"),
        ([_triangle_with_tail(edge=(1, np.inf, 3, 4))], "edge_attr contains NaN or infinite"),
        ([_triangle_with_tail(), nx.path_graph(3)], "different numbers of attributes"),
    ]
    for X, message in cases:
        with pytest.raises(ValueError, match=message):
            tokenizer.fit(X)
    with pytest.raises(TypeError, match="wrap it in a list"):
        tokenizer.fit(nx.path_graph(3))
    with pytest.raises(ValueError, match=r"'reindex' parameter of EulerTokenizer must be .* Got 'random' instead"):
        EulerTokenizer(reindex="random").fit([nx.path_graph(3)])


def test_transform_errors():
    tokenizer = EulerTokenizer(node_scope=6, max_len=8, random_state=0).fit([_triangle_with_tail()])
    dense = nx.complete_graph(5)
    nx.set_node_attributes(dense, 1, "x")
    nx.set_edge_attributes(dense, 7, "edge_attr")
    with pytest.raises(ValueError, match="graph 1 of X serializes to .* more than max_len=8"):
        tokenizer.transform([_triangle_with_tail(), dense])
    with pytest.raises(ValueError, match="more than node_scope=6"):
        tokenizer.transform([nx.path_graph(7)])
    for other in (nx.path_graph(3), _triangle_with_tail(x=[(1, 1)] * 4)):
        with pytest.raises(ValueError, match="fitted on 1 and 1"):
            tokenizer.transform([other])
    # Edges without their attribute: an error, not an IndexError.
    bare_edges = _triangle_with_tail()
    for u, v in bare_edges.edges:
        del bare_edges.edges[u, v]["edge_attr"]
    with pytest.raises(ValueError, match="0 edge attributes"):
        tokenizer.transform([bare_edges])
    with pytest.raises(ValueError, match="fitted on graphs"):
        tokenizer.transform(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"expected \(L, 4\)"):
        tokenizer.inverse_transform([np.zeros((5, 3), dtype=int)])
    with pytest.raises(ValueError, match="non-index token"):
        tokenizer.inverse_transform([np.full((2, 4), START)])


# ------------------------------------------- names, types and labels back
ATOMS = ("C", "N", "O", "Cl")


def _same_value(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        # Strings come back in the attribute's one dtype, the widest of fit.
        same_dtype = a.dtype == b.dtype or a.dtype.kind == b.dtype.kind == "U"
        return type(a) is type(b) and same_dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


def _same_record(a, b):
    return a.keys() == b.keys() and all(_same_value(a[key], b[key]) for key in a)


def assert_same_labelled_graph(original, decoded):
    assert decoded.number_of_nodes() == original.number_of_nodes()
    assert decoded.number_of_edges() == original.number_of_edges()
    assert nx.is_isomorphic(original, decoded, node_match=_same_record, edge_match=_same_record)


def _molecule():
    """Water-like: string labels and Python ints under the user's own names."""
    graph = nx.Graph()
    graph.add_nodes_from([(0, {"atom": "O", "charge": -1}), (1, {"atom": "H", "charge": 0}),
                          (2, {"atom": "H", "charge": 1})])
    graph.add_edges_from([(0, 1, {"bond": 1}), (0, 2, {"bond": 2})])
    return graph


def test_inverse_keeps_the_attribute_names():
    graph = _molecule()
    tokenizer = EulerTokenizer(node_attr=["atom", "charge"], edge_attr="bond", random_state=0).fit([graph])
    decoded = tokenizer.inverse_transform(tokenizer.transform([graph]))[0]
    assert all(set(data) == {"atom", "charge"} for _, data in decoded.nodes(data=True))
    assert all(set(data) == {"bond"} for *_, data in decoded.edges(data=True))
    assert list(tokenizer.node_attributes_) == ["atom", "charge"]
    assert list(tokenizer.edge_attributes_) == ["bond"]
    assert_same_labelled_graph(graph, decoded)
    # A key the graphs do not carry is not read, so it does not come back.
    tokenizer = EulerTokenizer(node_attr=["charge", "mass"], edge_attr=None, random_state=0).fit([graph])
    decoded = tokenizer.inverse_transform(tokenizer.transform([graph]))[0]
    assert sorted(decoded.nodes[n]["charge"] for n in decoded) == [-1, 0, 1]
    assert all(set(data) == {"charge"} for _, data in decoded.nodes(data=True))
    assert all(not data for *_, data in decoded.edges(data=True))


def test_inverse_keeps_integer_and_float_dtypes():
    graph = nx.path_graph(4)
    for node in graph:
        graph.nodes[node]["count"] = np.array([node, 2 * node], dtype=np.int32)
        graph.nodes[node]["flag"] = np.bool_(node % 2)
        graph.nodes[node]["level"] = np.float32(node / 2)
    for u, v in graph.edges:
        graph.edges[u, v]["order"] = np.uint8(u + 1)
    tokenizer = EulerTokenizer(node_attr=["count", "flag", "level"], edge_attr="order", random_state=0)
    decoded = tokenizer.fit([graph]).inverse_transform(tokenizer.transform([graph]))[0]
    assert tokenizer.node_attributes_ == {"count": np.int32, "flag": np.bool_, "level": np.float32}
    assert tokenizer.edge_attributes_ == {"order": np.uint8}
    for node in decoded:
        assert decoded.nodes[node]["count"].dtype == np.int32 and decoded.nodes[node]["count"].shape == (2,)
        assert type(decoded.nodes[node]["flag"]) is np.bool_
        assert type(decoded.nodes[node]["level"]) is np.float32
    assert all(type(order) is np.uint8 for *_, order in decoded.edges(data="order"))
    assert_same_labelled_graph(graph, decoded)
    # Feature matrices and graph dicts keep theirs too (under "x" and "edge_attr").
    record = {"edge_index": np.array([[0, 1], [1, 2]]), "x": np.array([[1], [2], [3]], dtype=np.int16),
              "edge_attr": np.array([[0.5], [1.5]])}
    tokenizer = EulerTokenizer(random_state=0).fit([record])
    decoded = tokenizer.inverse_transform(tokenizer.transform([record]))[0]
    assert tokenizer.node_attributes_ == {"x": np.int16} and tokenizer.edge_attributes_ == {"edge_attr": np.float64}
    assert {decoded.nodes[n]["x"].dtype for n in decoded} == {np.dtype(np.int16)}
    assert sorted(int(decoded.nodes[n]["x"][0]) for n in decoded) == [1, 2, 3]


def test_string_labels_come_back_as_the_labels():
    graph = _molecule()
    for node in graph:
        del graph.nodes[node]["charge"]
    graph.edges[0, 1]["bond"] = "single"
    graph.edges[0, 2]["bond"] = "double"
    tokenizer = EulerTokenizer(node_attr="atom", edge_attr="bond", random_state=0).fit([graph])
    assert tokenizer.node_categories_ == {"atom": [["H", "O"]]}
    assert tokenizer.edge_categories_ == {"bond": [["double", "single"]]}
    assert {"node0:H", "node0:O", "edge0:single", "edge0:double"} <= set(tokenizer.vocab_)
    sequences = tokenizer.transform([graph])
    decoded = tokenizer.inverse_transform(sequences)[0]
    assert sorted(decoded.nodes[n]["atom"] for n in decoded) == ["H", "H", "O"]
    assert sorted(bond for *_, bond in decoded.edges(data="bond")) == ["double", "single"]
    assert all(type(decoded.nodes[n]["atom"]) is str for n in decoded)
    # The caller's graph keeps its labels (the tokenizer codes a copy).
    assert graph.nodes[0]["atom"] == "O" and graph.edges[0, 1]["bond"] == "single"
    # A label unseen in fit gets the column default and comes back as None.
    other = _molecule()
    other.nodes[0]["atom"] = "S"
    nx.set_edge_attributes(other, "single", "bond")
    back = tokenizer.inverse_transform(tokenizer.transform([other]))[0]
    assert sorted(map(str, (back.nodes[n]["atom"] for n in back))) == ["H", "H", "None"]
    # The labels live in the state the checkpoints store, and in pickles.
    for restored in (EulerTokenizer.from_state(tokenizer.get_state()), pickle.loads(pickle.dumps(tokenizer))):
        assert restored.vocab_ == tokenizer.vocab_
        np.testing.assert_array_equal(restored.transform([graph])[0], sequences[0])
        assert_same_labelled_graph(graph, restored.inverse_transform(sequences)[0])
    # Vectors of labels: one vocabulary per position.
    pairs = nx.path_graph(3)
    for node, pair in zip(pairs, [("C", "ring"), ("N", "chain"), ("C", "chain")]):
        pairs.nodes[node]["kind"] = np.array(pair)
    tokenizer = EulerTokenizer(node_attr="kind", edge_attr=None, random_state=0).fit([pairs])
    assert tokenizer.node_categories_ == {"kind": [["C", "N"], ["chain", "ring"]]}
    assert_same_labelled_graph(pairs, tokenizer.inverse_transform(tokenizer.transform([pairs]))[0])


NAMES = st.sampled_from(["atom", "charge", "bond", "x", "edge_attr", "kind", "weight", "label"])


@st.composite
def labelled_graph_batches(draw):
    """1-3 graphs whose nodes and edges carry integer (Python, NumPy int32)
    and categorical (str) attributes under random names."""
    node_keys = draw(st.lists(NAMES, max_size=3, unique=True))
    edge_keys = draw(st.lists(NAMES, max_size=2, unique=True))
    kinds = {key: draw(st.sampled_from(["int", "int32", "label"])) for key in {*node_keys, *edge_keys}}

    def value(key):
        if kinds[key] == "label":
            return draw(st.sampled_from(ATOMS))
        number = draw(st.integers(-3, 5))
        return number if kinds[key] == "int" else np.int32(number)

    graphs = []
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 10))
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        pairs = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))
        graph.add_edges_from(draw(st.lists(pairs, max_size=2 * n)))
        for node in graph:
            graph.nodes[node].update({key: value(key) for key in node_keys})
        for u, v in graph.edges:
            graph.edges[u, v].update({key: value(key) for key in edge_keys})
        graphs.append(graph)
    return graphs, node_keys, edge_keys


@settings(max_examples=40, deadline=None)
@given(batch=labelled_graph_batches(), seed=st.integers(0, 3), reindex=st.sampled_from(["cyclic", "sequential"]))
def test_round_trip_keeps_names_types_and_labels(batch, seed, reindex):
    graphs, node_keys, edge_keys = batch
    tokenizer = EulerTokenizer(node_scope=16, reindex=reindex, node_attr=node_keys, edge_attr=edge_keys,
                               random_state=seed).fit(graphs)
    for graph, decoded in zip(graphs, tokenizer.inverse_transform(tokenizer.transform(graphs))):
        assert_same_labelled_graph(graph, decoded)
