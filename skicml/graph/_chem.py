"""SMILES strings to integer-featured molecular graphs.

:func:`smiles_to_graph` turns one SMILES string into the dictionary graph
format that the graph family accepts (GraphGPT spec, section 4): heavy atoms
are nodes, bonds are undirected edges stored once, and atoms and bonds carry
small integer features. The feature layout and the value indexing are those
of ``torch_geometric.utils.from_smiles`` (9 atom and 3 bond columns), so a
vocabulary built from our graphs also reads PyG's, and the GraphGPT molecule
vocabulary can be derived from :data:`ATOM_FEATURE_VALUES` and
:data:`BOND_FEATURE_VALUES`. The code is our own: it needs RDKit but neither
torch nor torch_geometric.

Differences from ``from_smiles``, on purpose:

- each bond appears once, as ``src < dst``, instead of once per direction;
- an invalid SMILES raises ``ValueError`` (PyG silently returns an empty
  molecule, which would become a training example with no atoms);
- a value outside PyG's tables (for instance an ``SP2D`` hybridization, which
  recent RDKit versions know and PyG does not) raises ``ValueError`` naming
  the atom, the feature and the value, where PyG fails with
  ``'x' is not in list``;
- RDKit's log is silenced only while parsing, not for the whole process.
"""

import itertools
import types

import numpy as np

__all__ = [
    "ATOM_FEATURES",
    "ATOM_FEATURE_VALUES",
    "BOND_FEATURES",
    "BOND_FEATURE_VALUES",
    "atom_descriptions",
    "smiles_to_graph",
    "smiles_to_graphs",
]

_RDKIT_HINT = "pip install rdkit"

# The value tables of torch_geometric.utils.smiles (x_map / e_map), copied so
# that the layout does not depend on torch_geometric being installed; a test
# checks them against PyG. Feature column k of a graph holds the position of
# the RDKit value in the k-th table.
ATOM_FEATURE_VALUES = types.MappingProxyType({
    "atomic_num": tuple(range(119)),
    "chirality": (
        "CHI_UNSPECIFIED", "CHI_TETRAHEDRAL_CW", "CHI_TETRAHEDRAL_CCW", "CHI_OTHER",
        "CHI_TETRAHEDRAL", "CHI_ALLENE", "CHI_SQUAREPLANAR", "CHI_TRIGONALBIPYRAMIDAL",
        "CHI_OCTAHEDRAL",
    ),
    "degree": tuple(range(11)),
    "formal_charge": tuple(range(-5, 7)),
    "num_hs": tuple(range(9)),
    "num_radical_electrons": tuple(range(5)),
    "hybridization": ("UNSPECIFIED", "S", "SP", "SP2", "SP3", "SP3D", "SP3D2", "OTHER"),
    "is_aromatic": (False, True),
    "is_in_ring": (False, True),
})
BOND_FEATURE_VALUES = types.MappingProxyType({
    "bond_type": (
        "UNSPECIFIED", "SINGLE", "DOUBLE", "TRIPLE", "QUADRUPLE", "QUINTUPLE", "HEXTUPLE",
        "ONEANDAHALF", "TWOANDAHALF", "THREEANDAHALF", "FOURANDAHALF", "FIVEANDAHALF",
        "AROMATIC", "IONIC", "HYDROGEN", "THREECENTER", "DATIVEONE", "DATIVE", "DATIVEL",
        "DATIVER", "OTHER", "ZERO",
    ),
    "stereo": (
        "STEREONONE", "STEREOANY", "STEREOZ", "STEREOE", "STEREOCIS", "STEREOTRANS",
    ),
    "is_conjugated": (False, True),
})
ATOM_FEATURES = tuple(ATOM_FEATURE_VALUES)
BOND_FEATURES = tuple(BOND_FEATURE_VALUES)

_ATOM_SIZES = np.array([len(v) for v in ATOM_FEATURE_VALUES.values()])
_BOND_SIZES = np.array([len(v) for v in BOND_FEATURE_VALUES.values()])


def _import_rdkit():
    try:
        from rdkit import Chem, rdBase
    except ImportError:
        raise ImportError(
            "converting SMILES to graphs needs RDKit; install it with "
            f"`{_RDKIT_HINT}` (or `pip install skicml[chem]`)."
        ) from None
    return Chem, rdBase


_ENUM_TABLES = None


def _enum_tables(Chem):
    """Lookups from RDKit enum members to their index in PyG's tables.

    Built by name, not by the enums' integer values: RDKit inserted ``SP2D``
    into ``HybridizationType``, which shifts the integers of ``SP3D`` and
    later members away from PyG's positions.
    """
    global _ENUM_TABLES
    if _ENUM_TABLES is None:
        def table(enum, names):
            return {member: names.index(name) for name, member in enum.names.items()
                    if name in names}
        _ENUM_TABLES = (
            table(Chem.ChiralType, ATOM_FEATURE_VALUES["chirality"]),
            table(Chem.HybridizationType, ATOM_FEATURE_VALUES["hybridization"]),
            table(Chem.BondType, BOND_FEATURE_VALUES["bond_type"]),
            table(Chem.BondStereo, BOND_FEATURE_VALUES["stereo"]),
        )
    return _ENUM_TABLES


def _where(smiles, position):
    return f"SMILES {smiles!r}" + ("" if position is None else f" at position {position}")


def _parse(smiles, position, Chem, rdBase):
    if not isinstance(smiles, str):
        raise TypeError(
            f"expected a SMILES string{'' if position is None else f' at position {position}'}"
            f", got {smiles!r} of type {type(smiles).__name__}."
        )
    # BlockLogs keeps RDKit from printing a parse error for every bad string
    # while leaving the user's logging settings alone afterwards.
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
        if mol is None:
            # Parse again without sanitization to tell a syntax error from a
            # chemistry problem (the message RDKit would have logged).
            raw = Chem.MolFromSmiles(smiles, sanitize=False)
            if raw is None:
                reason = "it is not valid SMILES syntax"
            else:
                problems = Chem.DetectChemistryProblems(raw)
                reason = (f"RDKit rejects its chemistry: {problems[0].Message()}"
                          if problems else "RDKit could not sanitize it")
            raise ValueError(f"invalid {_where(smiles, position)}: {reason.rstrip('.')}.")
    if mol.GetNumAtoms() == 0:
        raise ValueError(f"{_where(smiles, position)} describes a molecule with no atoms.")
    return mol


# RDKit getters of each feature column, read again only to word an error.
_ATOM_GETTERS = (
    "GetAtomicNum", "GetChiralTag", "GetTotalDegree", "GetFormalCharge", "GetTotalNumHs",
    "GetNumRadicalElectrons", "GetHybridization", "GetIsAromatic", "IsInRing",
)
_BOND_GETTERS = ("GetBondType", "GetStereo", "GetIsConjugated")


def _out_of_table(kind, items, rows, sizes, names, getters, smiles, position):
    bad_row, bad_col = np.argwhere((rows < 0) | (rows >= sizes))[0]
    value = getattr(items[int(bad_row)], getters[bad_col])()
    raise ValueError(
        f"{_where(smiles, position)}: {kind} {bad_row} has {names[bad_col]} = {value}, which "
        "torch_geometric's from_smiles layout has no value for; this molecule cannot be "
        "encoded (the supported values are in ATOM_FEATURE_VALUES and BOND_FEATURE_VALUES)."
    )


def _mol_to_graph(mol, smiles, position, Chem):
    chirality, hybridization, bond_type, stereo = _enum_tables(Chem)
    # Each column holds the position of the value in its table: formal
    # charges start at -5, the other integer tables at 0. Enum members
    # missing from a table map to -1, which the range check below reports.
    atoms = [
        (atom.GetAtomicNum(), chirality.get(atom.GetChiralTag(), -1), atom.GetTotalDegree(),
         atom.GetFormalCharge() + 5, atom.GetTotalNumHs(), atom.GetNumRadicalElectrons(),
         hybridization.get(atom.GetHybridization(), -1), atom.GetIsAromatic(), atom.IsInRing())
        for atom in mol.GetAtoms()
    ]
    x = np.array(atoms, dtype=np.int64).reshape(-1, len(ATOM_FEATURES))
    if ((x < 0) | (x >= _ATOM_SIZES)).any():
        _out_of_table("atom", list(mol.GetAtoms()), x, _ATOM_SIZES, ATOM_FEATURES, _ATOM_GETTERS,
                      smiles, position)

    pairs, attrs = [], []
    for bond in mol.GetBonds():
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        pairs.append((min(i, j), max(i, j)))
        attrs.append((bond_type.get(bond.GetBondType(), -1), stereo.get(bond.GetStereo(), -1),
                      bond.GetIsConjugated()))
    edge_index = np.array(pairs, dtype=np.int64).reshape(-1, 2).T
    edge_attr = np.array(attrs, dtype=np.int64).reshape(-1, len(BOND_FEATURES))
    if ((edge_attr < 0) | (edge_attr >= _BOND_SIZES)).any():
        _out_of_table("bond", list(mol.GetBonds()), edge_attr, _BOND_SIZES, BOND_FEATURES,
                      _BOND_GETTERS, smiles, position)
    # Sorted by (src, dst), the order PyG's from_smiles gives its edges.
    order = np.lexsort((edge_index[1], edge_index[0]))
    return {
        "num_nodes": int(x.shape[0]),
        "edge_index": np.ascontiguousarray(edge_index[:, order]),
        "x": x,
        "edge_attr": edge_attr[order],
    }


def _convert(smiles, position):
    Chem, rdBase = _import_rdkit()
    mol = _parse(smiles, position, Chem, rdBase)
    return _mol_to_graph(mol, smiles, position, Chem)


def smiles_to_graph(smiles):
    """Convert a SMILES string to an integer-featured molecular graph.

    Nodes are the heavy atoms (hydrogens are counted in the ``num_hs``
    feature, as in ``torch_geometric.utils.from_smiles``), edges are the
    bonds. Features are positions in :data:`ATOM_FEATURE_VALUES` and
    :data:`BOND_FEATURE_VALUES`, PyG's tables: column ``formal_charge`` holds
    ``charge + 5``, ``chirality``, ``hybridization``, ``bond_type`` and
    ``stereo`` hold the position of RDKit's enum name in the table, the
    others hold the value itself.

    Parameters
    ----------
    smiles : str
        A SMILES string, parsed and sanitized by RDKit with its defaults.

    Returns
    -------
    graph : dict
        - ``"num_nodes"``: int, the number of heavy atoms;
        - ``"edge_index"``: int64 array of shape (2, n_bonds), each bond once
          with ``edge_index[0] < edge_index[1]``, sorted by (src, dst);
        - ``"x"``: int64 array of shape (num_nodes, 9), columns
          :data:`ATOM_FEATURES`;
        - ``"edge_attr"``: int64 array of shape (n_bonds, 3), columns
          :data:`BOND_FEATURES`, row ``k`` describing bond ``edge_index[:, k]``.

    Raises
    ------
    ImportError
        If RDKit is not installed.
    TypeError
        If ``smiles`` is not a string.
    ValueError
        If RDKit cannot parse or sanitize ``smiles``, if it has no atoms, or
        if an atom or bond has a value outside PyG's tables (for instance a
        degree above 10).

    See Also
    --------
    smiles_to_graphs : Convert many SMILES strings.

    Examples
    --------
    >>> from skicml.graph import smiles_to_graph
    >>> graph = smiles_to_graph("CC=O")  # acetaldehyde
    >>> graph["num_nodes"]
    3
    >>> graph["edge_index"].tolist()
    [[0, 1], [1, 2]]
    >>> graph["x"][:, 0].tolist()  # atomic numbers
    [6, 6, 8]
    >>> graph["edge_attr"][:, 0].tolist()  # single, double
    [1, 2]
    """
    return _convert(smiles, None)


def _convert_chunk(smiles_list, start):
    return [_convert(s, start + k) for k, s in enumerate(smiles_list)]


def smiles_to_graphs(smiles_list, n_jobs=None):
    """Convert a sequence of SMILES strings to molecular graphs.

    Parameters
    ----------
    smiles_list : sequence of str
        SMILES strings (a list, an array or a pandas Series).

    n_jobs : int, default=None
        Number of joblib workers. ``None`` converts in a plain loop, which is
        the fastest choice below some ten thousand molecules (one molecule
        takes about 0.5 ms); ``-1`` uses all cores.

    Returns
    -------
    graphs : list of dict
        One graph per string, in input order, as returned by
        :func:`smiles_to_graph`.

    Raises
    ------
    ImportError
        If RDKit is not installed.
    TypeError
        If ``smiles_list`` is a single string, or an entry is not a string
        (for instance a missing value).
    ValueError
        If an entry is not a valid SMILES string; the message gives the
        string and its position in ``smiles_list``.

    Examples
    --------
    >>> from skicml.graph import smiles_to_graphs
    >>> graphs = smiles_to_graphs(["C", "CCO", "c1ccccc1"])
    >>> [g["num_nodes"] for g in graphs]
    [1, 3, 6]
    >>> smiles_to_graphs(["CCO", "C1CC"])
    Traceback (most recent call last):
    ...
    ValueError: invalid SMILES 'C1CC' at position 1: it is not valid SMILES syntax.
    """
    if isinstance(smiles_list, (str, bytes)):
        raise TypeError(
            "smiles_list must be a sequence of SMILES strings, got a single string; "
            "use smiles_to_graph for one molecule or wrap it in a list."
        )
    smiles_list = list(smiles_list)
    _import_rdkit()  # fail early, and in this process, when RDKit is missing
    if n_jobs is None or n_jobs == 1 or len(smiles_list) < 2:
        return _convert_chunk(smiles_list, 0)
    from joblib import Parallel, delayed, effective_n_jobs

    # A few chunks per worker amortise the pickling of the graphs while
    # keeping the load balanced.
    n_chunks = min(len(smiles_list), 4 * effective_n_jobs(n_jobs))
    bounds = np.linspace(0, len(smiles_list), n_chunks + 1).astype(int)
    chunks = Parallel(n_jobs=n_jobs)(
        delayed(_convert_chunk)(smiles_list[a:b], a) for a, b in itertools.pairwise(bounds)
    )
    return [graph for chunk in chunks for graph in chunk]


# Element names for the descriptions; others are written "element <Z>".
_ELEMENT_NAMES = {1: "hydrogen", 5: "boron", 6: "carbon", 7: "nitrogen", 8: "oxygen", 9: "fluorine",
                  14: "silicon", 15: "phosphorus", 16: "sulfur", 17: "chlorine", 35: "bromine", 53: "iodine"}


def atom_descriptions(graph):
    """One short English description per atom of a :func:`smiles_to_graph` graph.

    GIT reads molecules the way its text-attributed graphs are read: each
    atom is a sentence (element, aromaticity, ring membership, degree,
    hydrogens, charge, hybridization) that a text encoder embeds, as the
    OFA-style molecule inputs of the paper do, without a model download.

    Parameters
    ----------
    graph : dict
        A graph with the integer atom columns :data:`ATOM_FEATURES` in ``x``.

    Returns
    -------
    list of str
        One description per node, in node order.

    Examples
    --------
    >>> from skicml.graph import atom_descriptions, smiles_to_graph
    >>> atom_descriptions(smiles_to_graph("c1ccccc1O"))[-1]
    'oxygen, not in ring, degree 2, 1 hydrogens, neutral, hybridization SP2'
    """
    x = np.asarray(graph["x"])
    if x.ndim != 2 or x.shape[1] != len(ATOM_FEATURES):
        raise ValueError(f"atom_descriptions reads smiles_to_graph's {len(ATOM_FEATURES)} atom columns; "
                         f"got x of shape {x.shape}.")
    hybridization = ATOM_FEATURE_VALUES["hybridization"]
    texts = []
    for atomic_num, _, degree, charge, num_hs, _, hybrid, aromatic, ring in x.tolist():
        parts = [_ELEMENT_NAMES.get(atomic_num, f"element {atomic_num}")]
        if aromatic:
            parts.append("aromatic")
        parts += ["in ring" if ring else "not in ring", f"degree {degree}", f"{num_hs} hydrogens"]
        charge -= 5  # the column holds the position in the table, charge + 5
        parts.append("neutral" if charge == 0 else f"charge {charge:+d}")
        parts.append(f"hybridization {hybridization[hybrid]}")
        texts.append(", ".join(parts))
    return texts
