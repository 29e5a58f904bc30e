"""Molecules with labels that installed wheels ship, and synthetic graphs.

Used by one family: ``graph`` (GraphGPT's and GIT's pretraining recipes,
GraphGPT's tour row).

:func:`load_qm9` reads the 130,831 QM9 molecules that the ``qm9pack`` wheel
ships as CSV tables; :func:`load_nci_tpsa` reads the 4,999 NCI molecules and
their topological polar surface area that RDKit ships in ``rdkit/Data/NCI``;
:func:`make_triangle_graphs` draws random graphs labelled with their number of
triangles, the structure test of the GraphGPT paper (GraphGPT spec,
sections 3 and 5). Nothing here downloads: a reader whose package is missing
raises an ``ImportError`` that names the ``pip install`` command.
"""

import functools
import math
import pathlib

import numpy as np
import pandas as pd
from sklearn.utils import check_random_state

from ..utils.param_validation import Integral, Interval, Real, validate_params
from ._validation import is_real_in
from ._wheel_data import find_wheel_data

__all__ = ["HARTREE_TO_EV", "load_nci_tpsa", "load_qm9", "make_triangle_graphs", "qm9_split"]

#: Electronvolts per Hartree, the unit of QM9's energies (CODATA 2018: 27.211386 eV).
HARTREE_TO_EV = 27.211386

# snake_case name -> (qm9pack CSV column, unit). The units are those of the
# QM9 paper (Ramakrishnan et al., Sci. Data 1, 140022, 2014); "Ha" is the
# Hartree, the atomic unit of energy (1 Ha = 27.2114 eV).
_QM9_TARGETS = {
    "n_atoms": ("N_atoms", "count"),
    "rot_a": ("RotA_GHz", "GHz"),
    "rot_b": ("RotB_GHz", "GHz"),
    "rot_c": ("RotC_GHz", "GHz"),
    "dipole_moment": ("Dipole_debye", "D"),
    "polarizability": ("Polarizability_bohr3", "bohr^3"),
    "homo": ("HOMO_au", "Ha"),
    "lumo": ("LUMO_au", "Ha"),
    "homo_lumo_gap": ("HOMO_LUMO_gap_au", "Ha"),
    "r2": ("R2_bohr2", "bohr^2"),
    "zpve": ("ZPVE_au", "Ha"),
    "u0": ("InternalEnergy_0K_au", "Ha"),
    "u298": ("InternalEnergy_298K_au", "Ha"),
    "h298": ("Enthalphy_298K_au", "Ha"),  # sic: the CSV header spells it so
    "g298": ("GibbsFreeEnergy_298K_au", "Ha"),
    "cv": ("Heatcapacity_Cv_cal_mol_K", "cal/(mol K)"),
}
_QM9_FILES = ("qm9_part1.csv", "qm9_part2.csv", "qm9_part3.csv")
_QM9_HINT = "pip install qm9pack"
_RDKIT_HINT = "pip install rdkit"


def _qm9_data_dir():
    return find_wheel_data(
        "qm9pack", "data", _QM9_FILES,
        missing="load_qm9 reads the QM9 tables that the qm9pack wheel ships; install it "
        f"with `{_QM9_HINT}` (a 100 MB wheel). skicml never downloads data.",
        incomplete=f"the installed qm9pack lacks its data files {list(_QM9_FILES)}; reinstall it "
        f"with `{_QM9_HINT} --force-reinstall`.",
    )


@functools.lru_cache(maxsize=2)
def _read_qm9(folder):
    # All scalar columns at once: they cost 0.1 s more than one target
    # (parsing the long XYZ and frequency fields dominates), and the cache
    # then serves every choice of targets.
    columns = ["Index", "SMILES"] + [column for column, _ in _QM9_TARGETS.values()]
    frame = pd.concat(
        [pd.read_csv(pathlib.Path(folder) / name, usecols=columns) for name in _QM9_FILES],
        ignore_index=True,
    )
    frame = frame.rename(columns={column: name for name, (column, _) in _QM9_TARGETS.items()})
    frame = frame.rename(columns={"SMILES": "smiles"}).set_index("Index")
    frame.index.name = "qm9_id"
    return frame[["smiles", *_QM9_TARGETS]]


def _resolve_targets(targets):
    single = isinstance(targets, str)
    if single and targets == "all":
        return list(_QM9_TARGETS), False
    names = [targets] if single else list(targets)
    csv_names = {column: name for name, (column, _) in _QM9_TARGETS.items()}
    for name in names:
        if name not in _QM9_TARGETS:
            hint = f" (the CSV's {name!r} is called {csv_names[name]!r} here)" if (
                name in csv_names) else ""
            raise ValueError(
                f"unknown QM9 target {name!r}{hint}; targets must be 'all', one of "
                f"{list(_QM9_TARGETS)} or a list of them."
            )
    if not names:
        raise ValueError("targets must name at least one QM9 target, got an empty list.")
    if len(set(names)) != len(names):
        raise ValueError(f"targets lists a name more than once: {names}.")
    return names, single


@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left"), None],
        "targets": [str, "array-like"],
        "random_state": ["random_state"],
        "return_X_y": ["boolean"],
    },
    prefer_skip_nested_validation=True,
)
def load_qm9(n_samples=None, *, targets="homo_lumo_gap", random_state=None, return_X_y=False):
    """Load QM9 molecules (SMILES) and their DFT properties, offline.

    Reads the 130,831 molecules of QM9 (the small organic molecules of GDB-17
    with up to 9 heavy atoms C, N, O, F, whose geometry relaxation
    converged; Ramakrishnan et al., 2014) from the CSV tables that the
    ``qm9pack`` wheel ships, without importing qm9pack. The HOMO-LUMO gap is
    the target of PCQM4Mv2, the GraphGPT paper's headline benchmark, on
    smaller molecules (GraphGPT spec, section 3).

    The first call reads the tables (about 0.5 s); later calls in the same
    process reuse them.

    Parameters
    ----------
    n_samples : int, default=None
        Number of molecules to draw at random, without replacement; ``None``
        returns all 130,831 in QM9 order. Draws are nested: for one
        ``random_state``, the first ``k`` rows of a larger draw are the draw
        of size ``k``.

    targets : str or list of str, default="homo_lumo_gap"
        The properties to return, by their names below, or ``"all"``.
        Energies are in Hartree (Ha; 1 Ha = 27.2114 eV), as in the QM9 paper,
        all computed with B3LYP/6-31G(2df,p):

        ==================  ===========  ==========================================
        name                unit         property
        ==================  ===========  ==========================================
        ``n_atoms``         count        atoms, hydrogens included
        ``rot_a``           GHz          rotational constant A (also ``rot_b``,
                                         ``rot_c``)
        ``dipole_moment``   D (debye)    dipole moment
        ``polarizability``  bohr^3       isotropic polarizability
        ``homo``            Ha           energy of the HOMO
        ``lumo``            Ha           energy of the LUMO
        ``homo_lumo_gap``   Ha           LUMO - HOMO (mean 0.252, sd 0.047)
        ``r2``              bohr^2       electronic spatial extent
        ``zpve``            Ha           zero-point vibrational energy
        ``u0``              Ha           internal energy at 0 K
        ``u298``            Ha           internal energy at 298.15 K
        ``h298``            Ha           enthalpy at 298.15 K
        ``g298``            Ha           free energy at 298.15 K
        ``cv``              cal/(mol K)  heat capacity at 298.15 K
        ==================  ===========  ==========================================

    random_state : int, RandomState instance or None, default=None
        Seeds the draw of ``n_samples`` molecules; ignored when ``n_samples``
        is None.

    return_X_y : bool, default=False
        Return ``(smiles, y)`` instead of a data frame.

    Returns
    -------
    frame : pandas.DataFrame
        Returned when ``return_X_y`` is False: a column ``smiles`` (as listed
        by qm9pack) followed by one column per target, indexed by
        ``qm9_id``, the molecule's number in QM9 (``dsgdb9nsd_000001`` is 1).

    (smiles, y) : tuple
        Returned when ``return_X_y`` is True: ``smiles`` is an object array
        of shape (n_samples,); ``y`` is a float array of shape (n_samples,)
        when ``targets`` is one name, and (n_samples, n_targets) when it is a
        list or ``"all"``.

    Raises
    ------
    ImportError
        If qm9pack is not installed.

    See Also
    --------
    load_nci_tpsa : A smaller set whose target is an exact function of the graph.
    skicml.graph.smiles_to_graphs : Turn the SMILES into graphs.

    Examples
    --------
    >>> from skicml.datasets import load_qm9
    >>> frame = load_qm9(1000, random_state=0)  # doctest: +SKIP
    >>> list(frame.columns)  # doctest: +SKIP
    ['smiles', 'homo_lumo_gap']
    >>> smiles, y = load_qm9(500, targets=["homo", "lumo"], random_state=0,
    ...                      return_X_y=True)  # doctest: +SKIP
    >>> y.shape  # doctest: +SKIP
    (500, 2)
    """
    names, single = _resolve_targets(targets)
    frame = _read_qm9(str(_qm9_data_dir()))
    if n_samples is not None:
        if n_samples > len(frame):
            raise ValueError(
                f"n_samples must be at most {len(frame)}, the number of QM9 molecules, "
                f"got {n_samples}; use n_samples=None for all of them."
            )
        # A full permutation rather than choice(replace=False): its prefixes
        # make draws of different sizes nested.
        order = check_random_state(random_state).permutation(len(frame))[:n_samples]
        frame = frame.iloc[order]
    # Selecting columns gives a new frame; under pandas' copy-on-write the
    # cached table cannot be modified through it.
    frame = frame[["smiles", *names]]
    if return_X_y:
        y = frame[names[0]].to_numpy() if single else frame[names].to_numpy()
        return frame["smiles"].to_numpy(dtype=object), y
    return frame


def qm9_split():
    """QM9 split into the pretraining molecules and the benchmark pool.

    Every tenth molecule (``qm9_id % 10 == 0``, 13,087 of them) belongs to
    the benchmark pool only: the shipped GraphGPT backbone was pretrained on
    the other nine tenths (``skicml pretrain graphgpt``), so benchmarks and
    examples that fine-tune it draw their train and test molecules from the
    pool, which the backbone never saw.

    Returns
    -------
    pretraining : pandas.DataFrame
        The molecules with ``qm9_id % 10 != 0``, as :func:`load_qm9` returns
        them (``smiles`` and ``homo_lumo_gap`` in Hartree, indexed by
        ``qm9_id``).
    benchmark : pandas.DataFrame
        The molecules with ``qm9_id % 10 == 0``, same columns.

    Raises
    ------
    ImportError
        If qm9pack is not installed.

    See Also
    --------
    load_qm9 : The whole of QM9, or a random draw from it.
    HARTREE_TO_EV : The factor that turns the gap into electronvolts.

    Examples
    --------
    >>> from skicml.datasets import HARTREE_TO_EV, qm9_split
    >>> _, pool = qm9_split()  # doctest: +SKIP
    >>> (pool.index % 10 == 0).all()  # doctest: +SKIP
    True
    >>> gap_ev = pool["homo_lumo_gap"] * HARTREE_TO_EV  # doctest: +SKIP
    """
    frame = load_qm9(targets="homo_lumo_gap")
    held_out = frame.index.to_numpy() % 10 == 0
    return frame[~held_out], frame[held_out]


def _nci_files():
    names = ("first_5K.smi", "first_5k.tpsa.csv")
    folder = find_wheel_data(
        "rdkit", "Data/NCI", names,
        missing="load_nci_tpsa reads the NCI molecules that the rdkit wheel ships; install "
        f"it with `{_RDKIT_HINT}`. skicml never downloads data.",
        incomplete="the installed rdkit has no Data/NCI/first_5K.smi and first_5k.tpsa.csv; "
        f"reinstall it with `{_RDKIT_HINT} --force-reinstall`.",
    )
    return tuple(folder / name for name in names)


@functools.lru_cache(maxsize=2)
def _read_nci(smi_path, tpsa_path):
    # The .smi file gives the compound numbers, the .csv the TPSA; both list
    # the same SMILES in the same order. The csv's first line is a comment,
    # skipped by position: comment="#" would cut SMILES at their triple bonds.
    ids = pd.read_csv(smi_path, sep="\t", header=None, names=["smiles", "nci_id"])
    tpsa = pd.read_csv(tpsa_path, skiprows=1, header=None, names=["smiles", "tpsa"])
    if len(ids) != len(tpsa) or not (ids["smiles"].to_numpy() == tpsa["smiles"].to_numpy()).all():
        raise RuntimeError(
            f"{smi_path} and {tpsa_path} no longer list the same molecules in the same "
            "order; this rdkit version ships a different NCI layout than skicml expects."
        )
    frame = tpsa.set_index(ids["nci_id"])
    from rdkit import Chem, rdBase

    with rdBase.BlockLogs():  # one sanitization error per rejected molecule otherwise
        valid = np.array([Chem.MolFromSmiles(s) is not None for s in frame["smiles"]])
    return frame, valid


def load_nci_tpsa(*, drop_invalid=True, return_X_y=False):
    """Load 4,999 NCI molecules and their topological polar surface area.

    Reads ``rdkit/Data/NCI/first_5K.smi`` (SMILES and compound numbers) and
    ``first_5k.tpsa.csv`` (their TPSA, computed with Daylight's tools and
    Ertl's ``tpsa.c``), which the rdkit wheel ships. TPSA is a sum of
    contributions of polar atoms that depend only on each atom's element,
    charge, hydrogens, bonds and aromaticity, so it is an exact function of
    the molecular graph: a model that reads the graph can learn it without
    noise, which makes a clean learnability test (GraphGPT spec, section 6).
    RDKit's own ``CalcTPSA`` agrees with the shipped values within 0.01 on
    all valid molecules but two (a perchlorate salt and a nitrone).

    Parameters
    ----------
    drop_invalid : bool, default=True
        Drop the 8 molecules that RDKit refuses to sanitize (hypervalent Al,
        Si, P, Be, N, O), so that every SMILES converts with
        :func:`skicml.graph.smiles_to_graph`; False keeps all 4,999.

    return_X_y : bool, default=False
        Return ``(smiles, y)`` instead of a data frame.

    Returns
    -------
    frame : pandas.DataFrame
        Returned when ``return_X_y`` is False: columns ``smiles`` and
        ``tpsa`` (in square angstroms), indexed by ``nci_id``, the compound
        number listed in ``first_5K.smi``; rows in file order.

    (smiles, y) : tuple
        Returned when ``return_X_y`` is True: an object array of SMILES and a
        float array of TPSA values, both of shape (n_molecules,).

    Raises
    ------
    ImportError
        If RDKit is not installed.

    See Also
    --------
    load_qm9 : 130,831 molecules with quantum-chemical targets.

    Examples
    --------
    >>> from skicml.datasets import load_nci_tpsa
    >>> frame = load_nci_tpsa()  # doctest: +SKIP
    >>> frame.shape  # doctest: +SKIP
    (4991, 2)
    """
    smi, tpsa = _nci_files()
    frame, valid = _read_nci(str(smi), str(tpsa))
    frame = frame[valid] if drop_invalid else frame[["smiles", "tpsa"]]
    if return_X_y:
        return frame["smiles"].to_numpy(dtype=object), frame["tpsa"].to_numpy()
    return frame


def _check_edge_probability(edge_probability):
    """A declared number or None as it is; a (low, high) pair checked, as a tuple of floats."""
    if not isinstance(edge_probability, (tuple, list)):
        return edge_probability
    if (len(edge_probability) == 2 and all(is_real_in(p, 0, 1) for p in edge_probability)
            and edge_probability[0] <= edge_probability[1]):
        return tuple(float(p) for p in edge_probability)
    raise ValueError(
        "edge_probability must be None, a number in [0, 1] or a pair (low, high) with "
        f"0 <= low <= high <= 1, got {edge_probability!r}."
    )


@validate_params(
    {
        "n_graphs": [Interval(Integral, 1, None, closed="left")],
        "min_nodes": [Interval(Integral, 1, None, closed="left")],
        "max_nodes": [Interval(Integral, 1, None, closed="left")],
        "edge_probability": [Interval(Real, 0, 1, closed="both"), tuple, list, None],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_triangle_graphs(n_graphs=1000, *, min_nodes=5, max_nodes=25, edge_probability=None,
                         random_state=None):
    """Random graphs labelled with their number of triangles.

    Each graph is an Erdos-Renyi graph G(n, p) whose size ``n`` is drawn
    uniformly from ``min_nodes`` to ``max_nodes``; its label is the number of
    triangles (3-cliques) in it. Counting triangles needs the structure of
    the graph, not only its size or degrees, which is what the GraphGPT
    paper's triangle test probes; calling this function twice with different
    node ranges gives the paper's size-shift split (train on 5-25 nodes, test
    on 25-100).

    Parameters
    ----------
    n_graphs : int, default=1000
        Number of graphs.

    min_nodes, max_nodes : int, default=5, 25
        Inclusive range of the number of nodes, ``1 <= min_nodes <=
        max_nodes``.

    edge_probability : float, (float, float) or None, default=None
        The ``p`` of G(n, p): one number for every graph, or a pair
        ``(low, high)`` from which each graph draws its own ``p`` uniformly.
        None draws for each graph a target ``t`` uniformly in [1, 10] and sets
        ``p = min(1, (t / C(n, 3)) ** (1/3))``, the density at which G(n, p)
        has ``t`` triangles on average: counts then stay in the same range
        (mostly 0 to 15) whatever the graph size, as in the TU "TRIANGLES"
        set, so a size-shift test changes the structure, not the labels. With
        a fixed ``p`` the count grows like ``n**3``.

    random_state : int, RandomState instance or None, default=None
        Seeds the sizes, the edge probabilities and the edges.

    Returns
    -------
    graphs : list of networkx.Graph
        Undirected simple graphs with nodes ``0 .. n-1`` and no attributes.

    y : ndarray of shape (n_graphs,), dtype int64
        Number of triangles of each graph, equal to
        ``sum(networkx.triangles(g).values()) // 3``.

    Examples
    --------
    >>> from skicml.datasets import make_triangle_graphs
    >>> graphs, y = make_triangle_graphs(200, random_state=0)
    >>> len(graphs), y.shape, y.dtype
    (200, (200,), dtype('int64'))
    >>> large, y_large = make_triangle_graphs(50, min_nodes=26, max_nodes=100,
    ...                                       random_state=1)
    >>> min(g.number_of_nodes() for g in large) >= 26
    True
    """
    import networkx as nx

    if max_nodes < min_nodes:
        raise ValueError(
            f"max_nodes must be >= min_nodes, got min_nodes={min_nodes} and "
            f"max_nodes={max_nodes}."
        )
    edge_probability = _check_edge_probability(edge_probability)
    rng = check_random_state(random_state)

    graphs, y = [], np.empty(n_graphs, dtype=np.int64)
    for k in range(n_graphs):
        n = int(rng.randint(min_nodes, max_nodes + 1))
        if edge_probability is None:
            triples = math.comb(n, 3)
            p = min(1.0, (rng.uniform(1.0, 10.0) / triples) ** (1 / 3)) if triples else 1.0
        elif isinstance(edge_probability, tuple):
            p = rng.uniform(*edge_probability)
        else:
            p = edge_probability
        # Sampling the upper triangle directly (rather than nx.gnp_random_graph)
        # keeps every draw on the one RandomState, hence reproducible.
        src, dst = np.triu_indices(n, 1)
        keep = rng.random_sample(src.size) < p
        src, dst = src[keep], dst[keep]
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from(zip(src.tolist(), dst.tolist()))
        graphs.append(graph)
        # trace(A^3) / 6 counts every triangle once per ordered walk.
        adjacency = np.zeros((n, n), dtype=np.int64)
        adjacency[src, dst] = adjacency[dst, src] = 1
        y[k] = int(((adjacency @ adjacency) * adjacency).sum()) // 6
    return graphs, y
