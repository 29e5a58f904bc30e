"""Tests of the offline molecule readers and the triangle-count generator
(GraphGPT spec, sections 5 and 6)."""

import doctest
import importlib.util

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from skicml.datasets import HARTREE_TO_EV, _molecules, load_nci_tpsa, load_qm9, make_triangle_graphs, qm9_split

HAS_QM9 = importlib.util.find_spec("qm9pack") is not None
HAS_RDKIT = importlib.util.find_spec("rdkit") is not None
needs_qm9 = pytest.mark.skipif(not HAS_QM9, reason="pip install qm9pack")
needs_rdkit = pytest.mark.skipif(not HAS_RDKIT, reason="pip install rdkit")

QM9_SIZE = 130_831


@pytest.fixture(scope="module")
def qm9():
    # The one full read of the module; later calls hit the in-process cache.
    return load_qm9(targets="all")


# ------------------------------------------------------------------- QM9
@needs_qm9
def test_qm9_full_table(qm9):
    assert qm9.shape == (QM9_SIZE, 1 + len(_molecules._QM9_TARGETS))
    assert list(qm9.columns) == ["smiles", *_molecules._QM9_TARGETS]
    assert qm9.index.name == "qm9_id" and qm9.index.is_unique
    assert qm9.index[0] == 1 and qm9.index.max() == 133_885
    assert qm9["smiles"].iloc[:3].tolist() == ["C", "N", "O"]
    assert not qm9.isna().any().any()
    numeric = qm9.drop(columns="smiles")
    assert all(np.issubdtype(dtype, np.number) for dtype in numeric.dtypes)


@needs_qm9
def test_qm9_units_are_hartree(qm9):
    gap = qm9["homo_lumo_gap"]
    # The spec's figures: mean 0.252 Ha, sd 0.047 (in eV the mean would be ~6.9).
    assert gap.mean() == pytest.approx(0.252, abs=0.002)
    assert gap.std() == pytest.approx(0.047, abs=0.002)
    np.testing.assert_allclose(qm9["lumo"] - qm9["homo"], gap, atol=2e-4)
    assert (qm9["homo"] < 0).all() and (gap > 0).all()
    # Methane's internal energy at 0 K is -40.48 Ha.
    assert qm9.loc[1, "u0"] == pytest.approx(-40.47893)
    assert (qm9["u0"] < qm9["u298"]).all() and (qm9["u298"] < qm9["h298"]).all()
    assert qm9["n_atoms"].between(3, 29).all()


@needs_qm9
def test_qm9_default_is_gap_and_subsets_reproducible(qm9):
    frame = load_qm9(300, random_state=0)
    assert list(frame.columns) == ["smiles", "homo_lumo_gap"] and len(frame) == 300
    assert frame.index.is_unique
    pd.testing.assert_frame_equal(frame, load_qm9(300, random_state=0))
    assert not frame.index.equals(load_qm9(300, random_state=1).index)
    # Rows are the full table's rows, and draws of different sizes are nested.
    pd.testing.assert_frame_equal(frame, qm9.loc[frame.index, ["smiles", "homo_lumo_gap"]])
    pd.testing.assert_frame_equal(load_qm9(600, random_state=0).iloc[:300], frame)
    rng = np.random.RandomState(5)
    assert load_qm9(10, random_state=rng).index.equals(
        load_qm9(10, random_state=np.random.RandomState(5)).index)


@needs_qm9
def test_qm9_return_X_y_and_target_lists(qm9):
    smiles, y = load_qm9(50, random_state=2, return_X_y=True)
    assert smiles.dtype == object and smiles.shape == (50,) and isinstance(smiles[0], str)
    assert y.shape == (50,) and y.dtype == np.float64
    frame = load_qm9(50, targets=["lumo", "homo"], random_state=2)
    assert list(frame.columns) == ["smiles", "lumo", "homo"]
    np.testing.assert_array_equal(frame["smiles"].to_numpy(dtype=object), smiles)
    _, y2 = load_qm9(50, targets=["lumo", "homo"], random_state=2, return_X_y=True)
    assert y2.shape == (50, 2)
    np.testing.assert_allclose(y2[:, 0] - y2[:, 1], y, atol=2e-4)
    _, y_all = load_qm9(5, targets="all", random_state=2, return_X_y=True)
    assert y_all.shape == (5, len(_molecules._QM9_TARGETS))


@needs_qm9
def test_qm9_split_holds_out_every_tenth_molecule(qm9):
    pretraining, benchmark = qm9_split()
    assert (benchmark.index % 10 == 0).all() and (pretraining.index % 10 != 0).all()
    assert len(pretraining) + len(benchmark) == QM9_SIZE
    assert list(benchmark.columns) == ["smiles", "homo_lumo_gap"]
    pd.testing.assert_frame_equal(benchmark, qm9.loc[benchmark.index, ["smiles", "homo_lumo_gap"]])
    assert HARTREE_TO_EV == pytest.approx(27.211386)


@needs_qm9
def test_qm9_result_does_not_alias_the_cache(qm9):
    frame = load_qm9()
    frame.loc[1, "homo_lumo_gap"] = -1.0
    assert load_qm9().loc[1, "homo_lumo_gap"] == pytest.approx(0.5048)


@needs_qm9
@pytest.mark.parametrize("targets, match", [
    ("gap", "unknown QM9 target 'gap'"),
    ("HOMO_LUMO_gap_au", "is called 'homo_lumo_gap' here"),
    ([], "at least one"),
    (["homo", "homo"], "more than once"),
])
def test_qm9_bad_targets(targets, match):
    with pytest.raises(ValueError, match=match):
        load_qm9(10, targets=targets)


@needs_qm9
@pytest.mark.parametrize("n_samples", [0, -1, 2.5, True, QM9_SIZE + 1])
def test_qm9_bad_n_samples(n_samples):
    with pytest.raises(ValueError, match="n_samples"):
        load_qm9(n_samples)


def test_qm9_missing_package_says_how_to_install(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "qm9pack" else real_find_spec(name, *a))
    with pytest.raises(ImportError, match=r"pip install qm9pack.*never downloads"):
        load_qm9(10)


# ------------------------------------------------------------ NCI + TPSA
@needs_rdkit
def test_nci_tpsa_table():
    frame = load_nci_tpsa()
    assert list(frame.columns) == ["smiles", "tpsa"] and frame.index.name == "nci_id"
    assert len(frame) == 4991 and frame.index.is_unique
    everything = load_nci_tpsa(drop_invalid=False)
    assert len(everything) == 4999 and not everything.isna().any().any()
    assert frame.loc[1].tolist() == ["CC1=CC(=O)C=CC1=O", 34.14]
    # SMILES with triple bonds survive reading (a '#' comment rule would cut them).
    assert frame["smiles"].str.contains("#").sum() > 100
    smiles, y = load_nci_tpsa(return_X_y=True)
    assert smiles.dtype == object and y.shape == (4991,) and (y >= 0).all()


@needs_rdkit
def test_nci_tpsa_matches_rdkit_descriptor():
    # The "exactly learnable" claim: RDKit recomputes the shipped values.
    from rdkit import Chem
    from rdkit.Chem import rdMolDescriptors

    frame = load_nci_tpsa().iloc[::10]
    ours = np.array([rdMolDescriptors.CalcTPSA(Chem.MolFromSmiles(s)) for s in frame["smiles"]])
    close = np.abs(ours - frame["tpsa"].to_numpy()) < 0.011
    assert close.sum() >= len(frame) - 2


# -------------------------------------------------------------- triangles
def test_triangle_counts_match_networkx():
    graphs, y = make_triangle_graphs(150, random_state=0)
    assert len(graphs) == 150 and y.dtype == np.int64 and y.shape == (150,)
    for graph, count in zip(graphs, y):
        assert isinstance(graph, nx.Graph) and not graph.is_directed()
        assert 5 <= graph.number_of_nodes() <= 25
        assert sorted(graph.nodes) == list(range(graph.number_of_nodes()))
        assert nx.number_of_selfloops(graph) == 0
        assert count == sum(nx.triangles(graph).values()) // 3
    # The default density keeps the labels varied and moderate.
    assert len(np.unique(y)) > 8 and np.median(y) <= 10


def test_triangle_size_shift_keeps_label_range():
    _, small = make_triangle_graphs(300, random_state=1)
    large_graphs, large = make_triangle_graphs(300, min_nodes=26, max_nodes=100, random_state=1)
    assert min(g.number_of_nodes() for g in large_graphs) >= 26
    assert max(g.number_of_nodes() for g in large_graphs) <= 100
    assert abs(np.mean(small) - np.mean(large)) < 2.5


def test_triangle_reproducible_and_fixed_probability():
    a_graphs, a = make_triangle_graphs(20, random_state=3)
    b_graphs, b = make_triangle_graphs(20, random_state=3)
    np.testing.assert_array_equal(a, b)
    assert all(sorted(g.edges) == sorted(h.edges) for g, h in zip(a_graphs, b_graphs))
    _, c = make_triangle_graphs(20, random_state=4)
    assert not np.array_equal(a, c)

    complete, counts = make_triangle_graphs(5, min_nodes=6, max_nodes=6, edge_probability=1.0,
                                            random_state=0)
    assert all(g.number_of_edges() == 15 for g in complete) and (counts == 20).all()
    empty, counts = make_triangle_graphs(5, edge_probability=0.0, random_state=0)
    assert all(g.number_of_edges() == 0 for g in empty) and (counts == 0).all()
    graphs, counts = make_triangle_graphs(30, min_nodes=1, max_nodes=3,
                                          edge_probability=(0.2, 0.9), random_state=0)
    assert {g.number_of_nodes() for g in graphs} <= {1, 2, 3} and counts.max() <= 1


@pytest.mark.parametrize("kwargs, match", [
    ({"n_graphs": 0}, "n_graphs"),
    ({"min_nodes": 0}, "min_nodes"),
    ({"min_nodes": 10, "max_nodes": 5}, "max_nodes must be >= min_nodes"),
    ({"edge_probability": 1.5}, "edge_probability"),
    ({"edge_probability": (0.5, 0.2)}, "edge_probability"),
    ({"edge_probability": "dense"}, "edge_probability"),
])
def test_triangle_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_triangle_graphs(**kwargs)


def test_docstring_examples():
    result = doctest.testmod(_molecules, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
