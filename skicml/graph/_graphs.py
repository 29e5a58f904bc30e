"""One graph format for every input the graph estimators (GraphGPT, GIT) accept.

Users hand us networkx graphs, torch_geometric ``Data`` objects, plain dicts,
SMILES strings or a 2-D feature matrix; :func:`as_graph_list` turns each of
them into a :class:`Graph`: ``num_nodes``, each undirected edge listed once in
``edge_index`` and the attributes as float64 matrices (integer-valued columns
stay exact). Everything downstream (serialization, vocabulary, decoding) works
on this one format.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

__all__ = ["Graph", "as_graph_list", "rows_to_graphs"]


@dataclass
class Graph:
    """An undirected graph with numeric node and edge attributes.

    Attributes
    ----------
    num_nodes : int
    edge_index : ndarray of shape (2, n_edges), int64
        Each undirected edge once; self-loops are ``(u, u)``.
    x : ndarray of shape (num_nodes, n_node_attributes), float64
    edge_attr : ndarray of shape (n_edges, n_edge_attributes), float64
    """

    num_nodes: int
    edge_index: np.ndarray
    x: np.ndarray
    edge_attr: np.ndarray

    @property
    def n_edges(self):
        return self.edge_index.shape[1]


def _where(position):
    return f"graph {position} of X"


def _matrix(values, rows, name, position):
    values = np.asarray(values)
    if values.ndim == 1:
        values = values.reshape(-1, 1)
    if values.size == 0:
        return np.zeros((rows, values.shape[1] if values.ndim == 2 else 0))
    if values.ndim != 2 or values.shape[0] != rows:
        raise ValueError(
            f"{_where(position)}: {name} must have one row per {'node' if name == 'x' else 'edge'} "
            f"({rows}), got shape {values.shape}."
        )
    if values.dtype == bool:
        values = values.astype(np.int64)
    if not np.issubdtype(values.dtype, np.number):
        raise ValueError(f"{_where(position)}: {name} must be numeric, got dtype {values.dtype}.")
    values = values.astype(np.float64)
    if not np.isfinite(values).all():
        raise ValueError(f"{_where(position)}: {name} contains NaN or infinite values.")
    return values


def _undirected(edge_index, num_nodes, edge_attr, position):
    """Keep each undirected edge once (PyG lists both directions)."""
    edge_index = np.asarray(edge_index)
    if edge_index.size == 0:
        return np.zeros((2, 0), dtype=np.int64), edge_attr[:0]
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"{_where(position)}: edge_index must have shape (2, n_edges), got {edge_index.shape}.")
    if not np.issubdtype(edge_index.dtype, np.integer):
        raise ValueError(f"{_where(position)}: edge_index must hold integer node ids, got {edge_index.dtype}.")
    edge_index = edge_index.astype(np.int64)
    if edge_index.min() < 0 or edge_index.max() >= num_nodes:
        raise ValueError(
            f"{_where(position)}: edge_index refers to node {int(edge_index.max())} or "
            f"{int(edge_index.min())}, outside 0..{num_nodes - 1}."
        )
    low, high = edge_index.min(axis=0), edge_index.max(axis=0)
    keys = low * num_nodes + high
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    directed_twice = counts == 2
    if np.any(counts > 2) or np.any(directed_twice & (low[first] == high[first])):
        raise ValueError(
            f"{_where(position)}: has parallel edges (a multigraph); the graph estimators take simple graphs. "
            "Merge parallel edges first (e.g. nx.Graph(multigraph))."
        )
    first = np.sort(first)
    return np.stack([low[first], high[first]]), edge_attr[first]


def _from_networkx(graph, node_attr, edge_attr, position):
    if graph.is_directed():
        raise ValueError(
            f"{_where(position)} is a directed graph; the graph estimators take undirected graphs. "
            "Pass graph.to_undirected()."
        )
    if graph.is_multigraph():
        raise ValueError(
            f"{_where(position)} is a multigraph; the graph estimators take simple graphs. Pass nx.Graph(graph)."
        )
    nodes = list(graph.nodes)
    index = {node: i for i, node in enumerate(nodes)}
    edges = list(graph.edges(data=True))
    edge_index = np.array([[index[u] for u, _, _ in edges], [index[v] for _, v, _ in edges]],
                          dtype=np.int64).reshape(2, -1)
    x = _networkx_attributes([graph.nodes[node] for node in nodes], node_attr, "node", position)
    e = _networkx_attributes([data for _, _, data in edges], edge_attr, "edge", position)
    return Graph(len(nodes), edge_index, x, e)


def _networkx_attributes(records, keys, kind, position):
    if keys is None:
        return np.zeros((len(records), 0))
    keys = [keys] if isinstance(keys, str) else list(keys)
    present = [all(key in record for record in records) for key in keys]
    absent = [not any(key in record for record in records) for key in keys]
    columns = []
    for key, all_have, none_have in zip(keys, present, absent):
        if none_have:
            continue
        if not all_have:
            raise ValueError(f"{_where(position)}: some {kind}s have the attribute {key!r} and some do not.")
        values = [np.atleast_1d(np.asarray(record[key])) for record in records]
        widths = {len(v) for v in values}
        if len(widths) > 1:
            raise ValueError(f"{_where(position)}: {kind} attribute {key!r} has values of different lengths.")
        columns.append(np.stack(values).reshape(len(records), -1) if values else np.zeros((0, 1)))
    if not columns:
        return np.zeros((len(records), 0))
    return _matrix(np.concatenate(columns, axis=1), len(records), "x" if kind == "node" else "edge_attr",
                   position)


def _from_arrays(num_nodes, edge_index, x, edge_attr, position):
    if num_nodes is None:
        num_nodes = len(x) if x is not None else (int(np.max(edge_index)) + 1 if np.size(edge_index) else 0)
    num_nodes = int(num_nodes)
    x = np.zeros((num_nodes, 0)) if x is None else _matrix(x, num_nodes, "x", position)
    n_directed = np.asarray(edge_index).reshape(2, -1).shape[1] if edge_index is not None else 0
    edge_index = np.zeros((2, 0), dtype=np.int64) if edge_index is None else edge_index
    e = np.zeros((n_directed, 0)) if edge_attr is None else _matrix(edge_attr, n_directed, "edge_attr", position)
    edge_index, e = _undirected(edge_index, num_nodes, e, position)
    return Graph(num_nodes, edge_index, x, e)


def _to_numpy(value):
    if value is None:
        return None
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _one_graph(item, node_attr, edge_attr, position):
    if isinstance(item, Graph):
        return item
    if isinstance(item, nx.Graph):
        return _from_networkx(item, node_attr, edge_attr, position)
    if isinstance(item, bytes):
        try:
            item = item.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{_where(position)}: bytes that are not UTF-8 text; pass SMILES as str.") from None
    if isinstance(item, str):
        from ._chem import smiles_to_graph

        item = str(item)  # np.str_ from a string array: rdkit wants a plain str
        try:
            record = smiles_to_graph(item)
        except ValueError as error:
            raise ValueError(f"{_where(position)}: {error}") from None
        return _from_arrays(record["num_nodes"], record["edge_index"], record["x"], record["edge_attr"], position)
    if isinstance(item, dict):
        unknown = set(item) - {"num_nodes", "edge_index", "x", "edge_attr"}
        if unknown:
            raise ValueError(
                f"{_where(position)}: unknown keys {sorted(unknown)}; a graph dict has "
                "'num_nodes', 'edge_index', 'x' and 'edge_attr'."
            )
        return _from_arrays(item.get("num_nodes"), _to_numpy(item.get("edge_index")), _to_numpy(item.get("x")),
                            _to_numpy(item.get("edge_attr")), position)
    if hasattr(item, "edge_index") and hasattr(item, "num_nodes"):  # torch_geometric Data
        return _from_arrays(item.num_nodes, _to_numpy(item.edge_index), _to_numpy(getattr(item, "x", None)),
                            _to_numpy(getattr(item, "edge_attr", None)), position)
    raise TypeError(
        f"{_where(position)} is a {type(item).__name__}; expected a networkx graph, a torch_geometric "
        "Data, a dict with 'edge_index', a SMILES string (str or bytes), or a 2-D numeric array of "
        "feature rows."
    )


def rows_to_graphs(X):
    """Feature rows as path graphs: the 2-D array path of the estimators.

    Row ``i`` becomes a path over its ``p`` features; node ``j`` carries two
    attributes, the feature index ``j`` (so that the sequence knows which
    feature it reads wherever the walk starts) and the value.
    """
    X = np.asarray(X, dtype=np.float64)
    n_rows, n_features = X.shape
    edge_index = np.stack([np.arange(n_features - 1), np.arange(1, n_features)]).astype(np.int64)
    feature = np.arange(n_features, dtype=np.float64)
    empty = np.zeros((n_features - 1, 0))
    return [Graph(n_features, edge_index, np.column_stack([feature, row]), empty) for row in X]


def as_graph_list(X, *, node_attr="x", edge_attr="edge_attr"):
    """Normalise a collection of graphs to a list of :class:`Graph`.

    Parameters
    ----------
    X : sequence of graphs
        A list, tuple, 1-D array or pandas Series of networkx graphs
        (undirected, simple; any hashable node ids), torch_geometric
        ``Data`` objects, dicts with ``edge_index`` (2, E) and optional
        ``num_nodes``, ``x`` (N, d) and ``edge_attr`` (E, d'), or SMILES
        strings (``str`` or UTF-8 ``bytes``; needs rdkit), so that
        ``df["smiles"]`` or ``np.array(smiles)`` can be passed as is. Edges
        listed in both directions (as in torch_geometric) are kept once.
    node_attr, edge_attr : str, list of str or None
        Attribute keys read from networkx graphs (scalars or vectors,
        concatenated in the given order); ``None`` ignores attributes.

    Returns
    -------
    list of Graph
    """
    if isinstance(X, (str, bytes, nx.Graph, dict, Graph)) or hasattr(X, "edge_index"):
        raise TypeError(
            f"X must be a sequence of graphs, got a single {type(X).__name__}; wrap it in a list."
        )
    X = _series_values(X)
    graphs = [_one_graph(item, node_attr, edge_attr, i) for i, item in enumerate(X)]
    if not graphs:
        raise ValueError("X holds no graphs; at least one is needed.")
    for i, graph in enumerate(graphs):
        if graph.num_nodes == 0:
            raise ValueError(f"{_where(i)} has no nodes; an empty graph has nothing to learn from.")
    node_widths = {g.x.shape[1] for g in graphs}
    edge_widths = {g.edge_attr.shape[1] for g in graphs if g.n_edges}
    if len(node_widths) > 1 or len(edge_widths) > 1:
        raise ValueError(
            "The graphs of X have different numbers of attributes "
            f"(node: {sorted(node_widths)}, edge: {sorted(edge_widths)}); all graphs must share one layout."
        )
    if edge_widths:
        width = edge_widths.pop()
        for graph in graphs:
            if graph.n_edges == 0 and graph.edge_attr.shape[1] != width:
                graph.edge_attr = np.zeros((0, width))
    return graphs


def _is_graph(item):
    return isinstance(item, (nx.Graph, dict, str, bytes, Graph)) or hasattr(item, "edge_index")


def _series_values(X):
    """The values of a pandas Series (``df["smiles"]``) as a 1-D array; anything else as is."""
    if hasattr(X, "iloc") and getattr(X, "ndim", None) == 1 and hasattr(X, "to_numpy"):
        return X.to_numpy()
    return X


def is_graph_collection(X):
    """True when ``X`` is a sequence of graphs rather than a feature matrix.

    Lists, tuples, 1-D object arrays and pandas Series whose first item is
    a graph, and 1-D string arrays (``str`` or ``bytes`` SMILES), are; 2-D
    arrays (feature rows) and numeric 1-D arrays are not.
    """
    X = _series_values(X)
    if isinstance(X, np.ndarray):
        if X.ndim != 1 or len(X) == 0:
            return False
        return X.dtype.kind in "US" or (X.dtype == object and _is_graph(X[0]))
    if isinstance(X, (list, tuple)):
        return len(X) > 0 and _is_graph(X[0])
    return False


def read_graphs(estimator, X, *, reset, node_attr="x", edge_attr="edge_attr"):
    """Graphs of ``X`` and whether they came from the 2-D array path.

    A sequence of graphs (see :func:`is_graph_collection`: lists, 1-D
    arrays and pandas Series of graphs or SMILES) goes through
    :func:`as_graph_list`; anything else is validated as a finite numeric
    matrix by scikit-learn (which sets or checks ``n_features_in_``) and read
    as feature rows.
    """
    from sklearn.utils.validation import validate_data

    # A single graph or an empty list: as_graph_list says what to pass (a
    # dict subclass may be a sparse matrix, which scikit-learn rejects).
    single = isinstance(X, (nx.Graph, Graph, str, bytes)) or type(X) is dict or hasattr(X, "edge_index")
    if is_graph_collection(X) or single or (isinstance(X, (list, tuple)) and not X):
        return as_graph_list(X, node_attr=node_attr, edge_attr=edge_attr), False
    if not reset and not hasattr(estimator, "n_features_in_"):
        raise ValueError(
            f"{type(estimator).__name__} was fitted on graphs; pass graphs, not a feature matrix."
        )
    X = validate_data(estimator, X, reset=reset, dtype=np.float64)
    return rows_to_graphs(X), True
