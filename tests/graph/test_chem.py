"""Tests of SMILES -> graph conversion: parity with torch_geometric's
from_smiles, shapes and dtypes, and errors (GraphGPT spec, sections 4 and 5.2)."""

import doctest
import importlib.util
import re
import warnings

import joblib
import numpy as np
import pandas as pd
import pytest

pytest.importorskip("rdkit", reason="pip install rdkit")

from skicml.datasets import load_nci_tpsa
from skicml.graph import _chem
from skicml.graph._chem import (
    ATOM_FEATURE_VALUES,
    ATOM_FEATURES,
    BOND_FEATURE_VALUES,
    BOND_FEATURES,
    smiles_to_graph,
    smiles_to_graphs,
)

# Stereo bonds and centres, charges, radicals, isotopes, dummy atoms,
# hypervalent and octahedral atoms, salts and single atoms: the rarer values
# of every column.
EDGE_CASES = [
    "C", "[Na+].[Cl-]", "C/C=C/C", "C/C=C\\C", "C/C=C1\\C(=C)C1", "N[C@@H](C)C(=O)O",
    "N[C@H](C)C(=O)O", "[CH3]", "[CH2]", "[NH4+]", "F[S](F)(F)(F)(F)F", "F[Xe](F)(F)F",
    "F[Co@OH1](F)(F)(F)(F)F", "[2H]C", "*CC", "C#N", "c1ccncc1", "[O-][N+](=O)c1ccccc1",
    "C1CC1", "C[Pt](C)(C)C", "[Fe+6]", "O=C=O", "c1ccc2ccccc2c1", "[nH]1cccc1",
]


@pytest.fixture(scope="module")
def parity_smiles():
    nci = load_nci_tpsa()["smiles"].iloc[::25].tolist()  # 200 drug-like molecules
    qm9 = []
    if importlib.util.find_spec("qm9pack") is not None:
        from skicml.datasets import load_qm9

        qm9 = load_qm9(100, random_state=0)["smiles"].tolist()
    return nci + qm9 + EDGE_CASES


def test_feature_tables_match_torch_geometric():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit deprecation warnings on import
        smiles_module = pytest.importorskip("torch_geometric.utils.smiles")
    assert ATOM_FEATURES == tuple(smiles_module.x_map)
    assert BOND_FEATURES == tuple(smiles_module.e_map)
    assert {k: list(v) for k, v in ATOM_FEATURE_VALUES.items()} == smiles_module.x_map
    assert {k: list(v) for k, v in BOND_FEATURE_VALUES.items()} == smiles_module.e_map


def test_parity_with_from_smiles(parity_smiles):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from_smiles = pytest.importorskip("torch_geometric.utils").from_smiles
    assert len(parity_smiles) >= 300
    for smiles, graph in zip(parity_smiles, smiles_to_graphs(parity_smiles)):
        data = from_smiles(smiles)
        edge_index = data.edge_index.numpy()
        # PyG stores each bond in both directions; keep the src < dst copy.
        forward = edge_index[0] < edge_index[1]
        assert graph["num_nodes"] == data.num_nodes, smiles
        np.testing.assert_array_equal(graph["x"], data.x.numpy(), err_msg=smiles)
        np.testing.assert_array_equal(graph["edge_index"], edge_index[:, forward], err_msg=smiles)
        np.testing.assert_array_equal(graph["edge_attr"], data.edge_attr.numpy()[forward],
                                      err_msg=smiles)
        assert 2 * graph["edge_index"].shape[1] == edge_index.shape[1], smiles


@pytest.mark.parametrize("smiles", EDGE_CASES + ["CC(=O)Oc1ccccc1C(=O)O"])
def test_shapes_dtypes_and_bond_order(smiles):
    from rdkit import Chem

    graph = smiles_to_graph(smiles)
    mol = Chem.MolFromSmiles(smiles)
    n, n_bonds = mol.GetNumAtoms(), mol.GetNumBonds()
    assert set(graph) == {"num_nodes", "edge_index", "x", "edge_attr"}
    assert isinstance(graph["num_nodes"], int) and graph["num_nodes"] == n
    assert graph["x"].shape == (n, 9) and graph["x"].dtype == np.int64
    assert graph["edge_index"].shape == (2, n_bonds) and graph["edge_index"].dtype == np.int64
    assert graph["edge_attr"].shape == (n_bonds, 3) and graph["edge_attr"].dtype == np.int64
    src, dst = graph["edge_index"]
    assert (src < dst).all() and (dst < n).all()
    keys = src * n + dst
    assert (np.diff(keys) > 0).all()  # sorted, no duplicates
    sizes = [len(v) for v in ATOM_FEATURE_VALUES.values()]
    assert ((graph["x"] >= 0) & (graph["x"] < sizes)).all()
    for (i, j), attr in zip(graph["edge_index"].T, graph["edge_attr"]):
        bond = mol.GetBondBetweenAtoms(int(i), int(j))
        assert BOND_FEATURE_VALUES["bond_type"][attr[0]] == str(bond.GetBondType())


def test_molecules_without_bonds():
    methane = smiles_to_graph("C")
    assert methane["num_nodes"] == 1 and methane["edge_index"].shape == (2, 0)
    assert methane["x"].tolist() == [[6, 0, 4, 5, 4, 0, 4, 0, 0]]  # 4 Hs, charge 0 at index 5
    salt = smiles_to_graph("[Na+].[Cl-]")
    assert salt["num_nodes"] == 2 and salt["edge_attr"].shape == (0, 3)
    charges = [ATOM_FEATURE_VALUES["formal_charge"][k] for k in salt["x"][:, 3]]
    assert charges == [1, -1]


def test_feature_values_read_back():
    # Alanine: a CW-tagged stereocentre, a conjugated C=O, an sp3 N.
    graph = smiles_to_graph("N[C@@H](C)C(=O)O")
    columns = dict(zip(ATOM_FEATURES, graph["x"].T))
    assert [ATOM_FEATURE_VALUES["chirality"][k] for k in columns["chirality"]][1] == (
        "CHI_TETRAHEDRAL_CW")
    assert ATOM_FEATURE_VALUES["hybridization"][columns["hybridization"][0]] == "SP3"
    assert columns["num_hs"].tolist() == [2, 1, 3, 0, 0, 1]
    bonds = {tuple(e): a for e, a in zip(graph["edge_index"].T.tolist(), graph["edge_attr"])}
    assert BOND_FEATURE_VALUES["bond_type"][bonds[(3, 4)][0]] == "DOUBLE"
    assert bonds[(3, 4)][2] == 1  # conjugated
    trans = smiles_to_graph("C/C=C/C")
    assert BOND_FEATURE_VALUES["stereo"][trans["edge_attr"][1, 1]] == "STEREOE"


@pytest.mark.parametrize("bad, reason", [
    ("C1CC", "not valid SMILES syntax"),
    ("C(C)(C)(C)(C)C", "Explicit valence"),
    ("xyz", "not valid SMILES syntax"),
])
def test_invalid_smiles_names_string_and_position(bad, reason):
    with pytest.raises(ValueError, match=rf"^invalid SMILES '{re.escape(bad)}': .*{reason}"):
        smiles_to_graph(bad)
    with pytest.raises(ValueError, match=rf"'{re.escape(bad)}' at position 2: .*{reason}"):
        smiles_to_graphs(["C", "CCO", bad, "CC"])


def test_empty_and_non_string_inputs():
    with pytest.raises(ValueError, match="'' at position 1 describes a molecule with no atoms"):
        smiles_to_graphs(["C", ""])
    with pytest.raises(TypeError, match="at position 1, got nan of type float"):
        smiles_to_graphs(pd.Series(["C", np.nan]))
    with pytest.raises(TypeError, match="got a single string"):
        smiles_to_graphs("CCO")
    with pytest.raises(TypeError, match="expected a SMILES string, got 3"):
        smiles_to_graph(3)
    assert smiles_to_graphs([]) == []


@pytest.mark.parametrize("smiles, match", [
    ("[Cl+7]", "atom 0 has formal_charge = 7"),
    ("[Pt@SP1](Cl)(Cl)(N)N", "atom 0 has hybridization = SP2D"),
])
def test_values_outside_the_tables(smiles, match):
    with pytest.raises(ValueError, match=match):
        smiles_to_graph(smiles)


def test_invalid_smiles_logs_nothing_and_keeps_logging_on(capfd):
    from rdkit import Chem, RDLogger

    # PyG's from_smiles (run by the parity test) switches RDKit's log off
    # for the whole process; switch it back on so that this test can fail.
    RDLogger.EnableLog("rdApp.*")
    with pytest.raises(ValueError):
        smiles_to_graph("C1CC")
    assert "SMILES Parse Error" not in capfd.readouterr().err
    # Our silencing is temporary: a direct RDKit call still reports.
    assert Chem.MolFromSmiles("C1CC") is None
    assert "SMILES Parse Error" in capfd.readouterr().err


def test_joblib_workers_give_the_same_graphs():
    smiles = load_nci_tpsa()["smiles"].iloc[:40].tolist()
    serial = smiles_to_graphs(smiles)
    # Threads exercise the chunking and the positions in errors without the
    # seconds that starting worker processes costs.
    with joblib.parallel_config(backend="threading"):
        parallel = smiles_to_graphs(smiles, n_jobs=2)
    assert len(parallel) == len(serial)
    for a, b in zip(serial, parallel):
        assert a["num_nodes"] == b["num_nodes"]
        for key in ("edge_index", "x", "edge_attr"):
            np.testing.assert_array_equal(a[key], b[key])
    with pytest.raises(ValueError, match="'C1CC' at position 30"), joblib.parallel_config(
            backend="threading"):
        smiles_to_graphs(smiles[:30] + ["C1CC"], n_jobs=2)


def test_docstring_examples():
    result = doctest.testmod(_chem, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
