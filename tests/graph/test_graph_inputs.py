"""The graph inputs users pass first: SMILES in a pandas Series, a 1-D numpy
string array or as bytes, and Series of graphs, read the same as a list by
every GraphGPT estimator; 2-D numeric arrays stay feature rows."""

import networkx as nx
import numpy as np
import pandas as pd
import pytest

pytest.importorskip("rdkit", reason="pip install rdkit")

from skicml.graph import EulerTokenizer, GraphGPTClassifier, GraphGPTEncoder, GraphGPTRegressor  # noqa: E402
from skicml.graph._graphs import as_graph_list, is_graph_collection, read_graphs  # noqa: E402

SMILES = ["CCO", "c1ccccc1", "CC(=O)O", "CCN", "C1CC1", "O=C=O", "CCCl", "c1ccncc1"]
TINY = dict(hidden_size=16, num_layers=1, head_dim=8, mlp_ratio=2, n_views=2, random_state=0, device="cpu",
            max_epochs=1, batch_size=4)


def _forms(smiles):
    return {
        "Series": pd.Series(smiles, index=np.arange(10, 10 + len(smiles))),  # index is not positions
        "str Series": pd.Series(smiles, dtype="string"),
        "unicode array": np.array(smiles),
        "object array": np.array(smiles, dtype=object),
        "bytes list": [s.encode() for s in smiles],
        "bytes array": np.array([s.encode() for s in smiles]),
        "tuple": tuple(smiles),
    }


def _same(a, b):
    assert a.num_nodes == b.num_nodes
    np.testing.assert_array_equal(a.edge_index, b.edge_index)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.edge_attr, b.edge_attr)


def test_smiles_containers_read_as_the_list():
    reference = as_graph_list(SMILES)
    for name, X in _forms(SMILES).items():
        assert is_graph_collection(X), name
        graphs, from_rows = read_graphs(GraphGPTEncoder(), X, reset=True)
        assert not from_rows, name
        assert len(graphs) == len(reference), name
        for a, b in zip(graphs, reference):
            _same(a, b)


def test_series_of_graphs_and_single_bytes():
    graphs = [nx.path_graph(3), nx.cycle_graph(4)]
    read, from_rows = read_graphs(GraphGPTEncoder(), pd.Series(graphs), reset=True)
    assert not from_rows and [g.num_nodes for g in read] == [3, 4]
    with pytest.raises(TypeError, match="single bytes"):
        as_graph_list(b"CCO")
    with pytest.raises(ValueError, match="graph 1 of X"):
        as_graph_list(pd.Series(["CCO", "not a smiles ("]))


def test_numeric_arrays_keep_their_meaning():
    rows = np.arange(12.0).reshape(3, 4)
    assert not is_graph_collection(rows) and not is_graph_collection(np.arange(3.0))
    assert not is_graph_collection(pd.Series([1.0, 2.0]))
    estimator = GraphGPTEncoder()
    graphs, from_rows = read_graphs(estimator, rows, reset=True)
    assert from_rows and estimator.n_features_in_ == 4 and graphs[0].num_nodes == 4
    with pytest.raises(ValueError, match="2D array"):
        read_graphs(GraphGPTEncoder(), np.arange(3.0), reset=True)


def test_tokenizer_reads_every_container():
    tokenizer = EulerTokenizer(random_state=0).fit(pd.Series(SMILES))
    reference = tokenizer.transform(SMILES)
    for name, X in _forms(SMILES).items():
        tokens = EulerTokenizer(random_state=0).fit(X).transform(X)
        assert len(tokens) == len(reference), name
        for a, b in zip(tokens, reference):  # one (length, width) array per graph
            np.testing.assert_array_equal(a, b, err_msg=name)


def test_encoder_reads_series_and_string_arrays():
    encoder = GraphGPTEncoder(**TINY).fit(pd.Series(SMILES))
    reference = encoder.transform(SMILES)
    for name, X in _forms(SMILES).items():
        np.testing.assert_allclose(encoder.transform(X), reference, rtol=1e-6, atol=1e-7, err_msg=name)


def test_regressor_and_classifier_fit_and_predict_a_series():
    frame = pd.DataFrame({"smiles": SMILES, "y": np.arange(len(SMILES), dtype=float),
                          "label": ["a", "b"] * (len(SMILES) // 2)})
    regressor = GraphGPTRegressor(**TINY).fit(frame["smiles"], frame["y"])
    reference = regressor.predict(SMILES)
    assert reference.shape == (len(SMILES),)
    np.testing.assert_allclose(regressor.predict(frame["smiles"]), reference, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(regressor.predict(frame["smiles"].to_numpy(dtype=str)), reference,
                               rtol=1e-6, atol=1e-7)
    listed = GraphGPTRegressor(**TINY).fit(SMILES, frame["y"].to_numpy())
    np.testing.assert_allclose(listed.predict(SMILES), reference, rtol=1e-6, atol=1e-7)

    classifier = GraphGPTClassifier(**TINY).fit(frame["smiles"], frame["label"])
    proba = classifier.predict_proba(SMILES)
    np.testing.assert_allclose(classifier.predict_proba(np.array(SMILES)), proba, rtol=1e-6, atol=1e-7)
    assert set(classifier.predict(frame["smiles"])) <= {"a", "b"}
