"""``EulerTokenizer``: graphs to stacked token sequences and back (GraphGPT).

A graph becomes one row per step of an Eulerian walk (section 2 of the
GraphGPT paper): the walk covers every edge, duplicating a few to make the
graph Eulerian, starts at a random node, and jumps between connected
components. Each row stacks ``F`` tokens that the model embeds and sums:

``[node index, node attribute 1..Dn, edge attribute 1..De, step kind]``

- the node index is the node's order of first appearance in the walk plus a
  random offset modulo ``node_scope`` ("cyclic re-index"), so that every
  index token gets trained, not only the small ones;
- the edge attributes are those of the edge used to arrive at the node (the
  column defaults on the first row and on jumps);
- the step kind (``<start>``, ``<edge>``, ``<jump>``) marks jumps, so that
  disconnected graphs decode losslessly even without edge attributes;
- a final ``<eos>`` row is where the fine-tuning head reads the graph.

The walk comes from the ``skicml::euler_serialize`` custom op (a compiled
linear-time kernel); the vocabulary is learned in ``fit`` from the data.
"""

from __future__ import annotations

import hashlib

import networkx as nx
import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ...base import seed_from_random_state
from ...ops import euler_serialize
from ...utils.param_validation import Integral, Interval, StrOptions, fit_context
from .._graphs import Graph, _series_values, _to_numpy, is_graph_collection, read_graphs

__all__ = ["EulerTokenizer", "pad_sequences"]

SPECIAL_TOKENS = ("<pad>", "<mask>", "<eos>", "<start>", "<edge>", "<jump>")
PAD, MASK, EOS, START, EDGE, JUMP = range(len(SPECIAL_TOKENS))
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix(values):
    """The splitmix64 finaliser, vectorised (uint64 arithmetic wraps)."""
    z = np.asarray(values, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _content_hash(graph):
    digest = hashlib.blake2b(digest_size=8)
    digest.update(np.int64(graph.num_nodes).tobytes())
    for array in (graph.edge_index, graph.x, graph.edge_attr):
        digest.update(np.ascontiguousarray(array).tobytes())
    return int.from_bytes(digest.digest(), "little")


def pad_sequences(sequences, max_len=None, dtype=np.int64):
    """Stack token sequences of shape (L_i, F) into (n, max_len, F), 0-padded.

    Parameters
    ----------
    sequences : sequence of ndarray of shape (L_i, F)
    max_len : int or None
        Length of the output; ``None`` uses the longest sequence. Longer
        sequences raise a ValueError.
    dtype : numpy dtype, default=np.int64

    Returns
    -------
    ndarray of shape (n, max_len, F)
    """
    lengths = np.array([len(s) for s in sequences])
    width = sequences[0].shape[1] if len(sequences) else 0
    longest = int(lengths.max()) if len(lengths) else 0
    max_len = longest if max_len is None else max_len
    if longest > max_len:
        raise ValueError(
            f"A sequence has {longest} rows, more than max_len={max_len}; raise max_len (the graph has "
            "more edges than the model was sized for)."
        )
    out = np.zeros((len(sequences), max_len, width), dtype=dtype)
    for i, sequence in enumerate(sequences):
        out[i, : len(sequence)] = sequence
    return out


class _Column:
    """The vocabulary of one attribute column: categories or quantile bins."""

    def __init__(self, name, values, n_bins):
        self.name = name
        self.discrete = bool(np.all(values == np.round(values)))
        if self.discrete:
            self.categories = np.unique(values)
            self.labels = [str(int(v)) for v in self.categories]
        else:
            edges = np.unique(np.quantile(values, np.linspace(0, 1, n_bins + 1)))[1:-1]
            # Interpolated quantiles can fall in a gap of the data: merge the
            # empty bins into their left neighbour (bin 0 holds the minimum).
            occupied = np.bincount(np.searchsorted(edges, values, side="right"), minlength=len(edges) + 1)
            self.edges = edges[occupied[1:] > 0]
            bins = np.searchsorted(self.edges, values, side="right")
            self.categories = np.array([values[bins == k].mean() for k in range(len(self.edges) + 1)])
            self.labels = [f"bin{k}" for k in range(len(self.categories))]

    def tokens(self):
        return [f"{self.name}:?"] + [f"{self.name}:{label}" for label in self.labels]

    def encode(self, values, first_id):
        """Token ids of ``values``; unseen categories map to the column default."""
        if self.discrete:
            position = np.clip(np.searchsorted(self.categories, values), 0, len(self.categories) - 1)
            known = self.categories[position] == values
            return np.where(known, first_id + 1 + position, first_id)
        return first_id + 1 + np.searchsorted(self.edges, values, side="right")

    def decode(self, ids, first_id):
        offset = ids - first_id - 1
        return np.where(offset >= 0, self.categories[np.clip(offset, 0, None)], np.nan)

    def state(self):
        state = {"name": self.name, "discrete": self.discrete, "categories": self.categories.tolist(),
                 "labels": list(self.labels)}
        if not self.discrete:
            state["edges"] = self.edges.tolist()
        return state

    @classmethod
    def from_state(cls, state):
        column = cls.__new__(cls)
        column.name, column.discrete = state["name"], state["discrete"]
        column.categories = np.asarray(state["categories"], dtype=np.float64)
        if column.discrete:
            column.labels = [str(int(v)) for v in column.categories]
        else:
            column.edges = np.asarray(state["edges"], dtype=np.float64)
            column.labels = [f"bin{k}" for k in range(len(column.categories))]
        # States written before label columns existed name their tokens as above.
        column.labels = list(state.get("labels", column.labels))
        return column


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _sorted_labels(values, name):
    try:
        unique = list(dict.fromkeys(_plain(v) for v in values))
    except TypeError:
        raise ValueError(f"The attribute {name!r} holds unhashable values; labels must be hashable.") from None
    try:
        return sorted(unique)
    except TypeError:  # labels of several types: a fixed order all the same
        return sorted(unique, key=lambda v: (type(v).__name__, repr(v)))


class _Attribute:
    """How the values of one attribute key looked in ``fit``, to give them back alike.

    ``shape`` is the shape of one value (``()`` for scalars), ``python`` says
    whether the scalars were Python's own (``int``, ``str``...) rather than
    NumPy scalars, and ``labels`` holds, for attributes of strings or other
    objects, the sorted labels of each of the value's positions: the reader
    sees their positions in these lists (codes), which keeps it numeric.
    """

    def __init__(self, name, shape, dtype, python=False, labels=None):
        self.name, self.shape, self.dtype = name, tuple(shape), np.dtype(dtype)
        self.python, self.labels = python, labels
        self._codes = None if labels is None else [{label: i for i, label in enumerate(ls)} for ls in labels]

    @property
    def width(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @classmethod
    def from_values(cls, name, values):
        arrays = [np.asarray(v) for v in values]
        shape = arrays[0].shape
        try:
            dtype = np.result_type(*{a.dtype for a in arrays})
        except TypeError:  # numbers and strings mixed
            dtype = np.dtype(object)
        python = shape == () and not any(isinstance(v, (np.generic, np.ndarray)) for v in values)
        labels = None
        if dtype.kind in "OSU":
            flat = [a.reshape(-1) for a in arrays if a.shape == shape]
            labels = [_sorted_labels([f[j] for f in flat], name) for j in range(int(np.prod(shape)))]
        return cls(name, shape, dtype, python, labels)

    def token_names(self, j):
        """Token names of the labels of position ``j``: the labels, unless two would read alike."""
        names = [str(label) for label in self.labels[j]]
        if len(set(names)) < len(names) or "?" in names:
            names = [f"#{code}" for code in range(len(names))]
        return names

    def code(self, value):
        """``value`` with each label replaced by its code (-1, the column default, for unseen ones)."""
        array = np.asarray(value)
        if array.size != self.width:  # the reader reports the width
            return np.full(array.shape, -1)
        flat = [codes.get(_plain(v), -1) for codes, v in zip(self._codes, array.reshape(-1))]
        return flat[0] if array.ndim == 0 else np.array(flat).reshape(array.shape)

    def restore(self, flat):
        """The value of decoded column values ``flat`` (NaN for a column default) as it was read."""
        missing = np.isnan(flat)
        if self.labels is not None:
            items = [None if gone else labels[int(c)] for labels, c, gone in zip(self.labels, flat, missing)]
            if self.shape == ():
                return items[0]
            array = np.empty(len(items), dtype=object)
            for i, item in enumerate(items):
                array[i] = item
            return (array if missing.any() else array.astype(self.dtype)).reshape(self.shape)
        # A column default holds no value: NaN, in float64 where the dtype has no NaN.
        array = flat if missing.any() and self.dtype.kind in "biu" else flat.astype(self.dtype)
        if self.shape == ():
            return array[0].item() if self.python else array[0]
        return array.reshape(self.shape)

    def state(self):
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype.str, "python": self.python,
                "labels": self.labels}

    @classmethod
    def from_state(cls, state):
        return cls(state["name"], state["shape"], state["dtype"], state["python"], state["labels"])


def _records(graph, side):
    if side == "node":
        return [data for _, data in graph.nodes(data=True)]
    return [data for *_, data in graph.edges(data=True)]


def _networkx_layout(graphs, keys, side):
    """The :class:`_Attribute` of each of ``keys`` that the networkx ``graphs`` carry."""
    if keys is None:
        return []
    layout = []
    for key in [keys] if isinstance(keys, str) else list(keys):
        values = [data[key] for graph in graphs for data in _records(graph, side) if key in data]
        if values:  # the reader skips keys no graph has
            layout.append(_Attribute.from_values(key, values))
    return layout


def _array_dtype(item, key):
    """The dtype of array ``key`` (``"x"`` or ``"edge_attr"``) of a non-networkx graph, or None."""
    if isinstance(item, (str, bytes)):
        return np.dtype(np.int64)  # the SMILES reader's features
    if isinstance(item, Graph):
        return getattr(item, key).dtype
    value = item.get(key) if isinstance(item, dict) else getattr(item, key, None)
    return None if value is None else _to_numpy(value).dtype


def _attribute_values(values, layout):
    """The attribute dict of one node or edge from its decoded column ``values``."""
    out, start = {}, 0
    for attribute in layout:
        out[attribute.name] = attribute.restore(values[start:start + attribute.width])
        start += attribute.width
    return out


def _side_layout(networkx_layout, array_dtype, width, key):
    """The attributes of one side (node or edge) of ``width`` columns.

    The networkx keys when they account for every column; otherwise (no
    networkx graph, feature rows, a layout the reader rejected) one array
    under ``key`` of the other graphs' dtype, float64 when none is known,
    empty when those graphs hold an empty one.
    """
    if networkx_layout is not None and sum(a.width for a in networkx_layout) == width:
        return networkx_layout
    return [_Attribute(key, (width,), array_dtype or np.float64)]


def _label_token_names(layout):
    """Per column of ``layout``: the token names of its labels, or None for a numeric column."""
    return [None if a.labels is None else a.token_names(j) for a in layout for j in range(a.width)]


def _coded(X, node_layout, edge_layout):
    """``X`` with the labels of its networkx graphs replaced by their codes, when there are labels."""
    coders = [(side, attribute) for side, layout in (("node", node_layout), ("edge", edge_layout))
              for attribute in layout or () if attribute.labels is not None]
    if not coders or not is_graph_collection(X):
        return X
    items = []
    for item in _series_values(X):
        if isinstance(item, nx.Graph):
            item = item.copy()  # new attribute dicts: the caller's graph keeps its labels
            for side, attribute in coders:
                for data in _records(item, side):
                    if attribute.name in data:
                        data[attribute.name] = attribute.code(data[attribute.name])
        items.append(item)
    return items


class EulerTokenizer(TransformerMixin, BaseEstimator):
    """Serialize graphs into stacked token sequences along Eulerian walks.

    The lossless, reversible graph-to-sequence map of GraphGPT (Zhao et al.,
    ICML 2025). Each graph becomes an int64 array of shape ``(L, F)``: one
    row per step of a walk that covers every edge (plus a final ``<eos>``
    row), ``F = 2 + n_node_attributes + n_edge_attributes`` stacked tokens
    per row. Different seeds give different walks and index offsets of the
    same graph: the augmentation GraphGPT trains with.

    Parameters
    ----------
    node_scope : int, default=64
        Number of node index tokens; graphs may have at most this many nodes.
        The paper's molecule models use 512; QM9 needs 9.
    reindex : {"cyclic", "sequential"}, default="cyclic"
        ``"sequential"`` numbers nodes 0, 1, 2, ... by first appearance;
        ``"cyclic"`` adds a random offset modulo ``node_scope`` (the paper's
        default), which spreads training over all index tokens.
    node_attr, edge_attr : str, list of str or None, default="x", "edge_attr"
        Attribute keys read from networkx graphs: numbers, or labels
        (strings or other hashable objects, one token per label seen in
        ``fit``); scalars or arrays. :meth:`inverse_transform` gives them
        back under the same keys.
    n_bins : int, default=16
        Quantile bins of attribute columns with non-integer values (integer
        columns get one token per value seen in ``fit``).
    max_len : int or None, default=None
        Longest sequence ``transform`` may emit; ``None`` means no limit.
    random_state : int, RandomState instance or None, default=None
        Seeds the walks. A graph's walk depends only on the graph, the seed
        and the view, so a graph serializes the same way wherever it sits
        in ``X``.

    Attributes
    ----------
    vocab_ : dict of str to int
        Token to id; id 0 is padding.
    id_to_token_ : list of str
    vocab_size_ : int
    n_node_attributes_, n_edge_attributes_ : int
        Attribute columns (an array-valued key counts one per position).
    node_attributes_, edge_attributes_ : dict of str to numpy.dtype
        The keys read in ``fit``, in column order, with the dtype of their
        values, which :meth:`inverse_transform` restores: the networkx keys
        of ``node_attr`` / ``edge_attr`` the graphs carry, or ``"x"`` /
        ``"edge_attr"`` for graphs given as arrays (dicts, torch_geometric
        ``Data``, SMILES, feature rows).
    node_categories_, edge_categories_ : dict of str to list of list
        For each key of labels, the sorted labels seen in ``fit`` at each
        position of its value (one list for a scalar key).
    n_stacked_ : int
        Tokens per row ``F``.
    max_nodes_ : int
        Largest graph seen in ``fit``.

    Examples
    --------
    >>> import networkx as nx
    >>> from skicml.graph import EulerTokenizer
    >>> tokenizer = EulerTokenizer(random_state=0).fit([nx.cycle_graph(4)])
    >>> tokens = tokenizer.transform([nx.path_graph(3)])
    >>> tokens[0].shape  # a walk over both edges (3 rows from an end, 4 from the middle), plus <eos>
    (5, 2)
    >>> nx.is_isomorphic(tokenizer.inverse_transform(tokens)[0], nx.path_graph(3))
    True

    Attributes come back under their own names, with their types: labels
    as the labels, integers as integers.

    >>> water = nx.Graph()
    >>> water.add_nodes_from([(0, {"atom": "O", "charge": -1}), (1, {"atom": "H", "charge": 0}),
    ...                       (2, {"atom": "H", "charge": 1})])
    >>> water.add_edges_from([(0, 1, {"bond": 1}), (0, 2, {"bond": 1})])
    >>> tokenizer = EulerTokenizer(node_attr=["atom", "charge"], edge_attr="bond", random_state=0)
    >>> tokens = tokenizer.fit_transform([water])
    >>> tokenizer.node_attributes_, tokenizer.edge_attributes_
    ({'atom': dtype('<U1'), 'charge': dtype('int64')}, {'bond': dtype('int64')})
    >>> back = tokenizer.inverse_transform(tokens)[0]
    >>> sorted(back.nodes(data=True))  # nodes numbered in the order the walk met them
    [(0, {'atom': 'H', 'charge': 1}), (1, {'atom': 'O', 'charge': -1}), (2, {'atom': 'H', 'charge': 0})]
    >>> list(back.edges(data="bond"))
    [(0, 1, 1), (1, 2, 1)]
    >>> nx.is_isomorphic(back, water, node_match=dict.__eq__, edge_match=dict.__eq__)
    True
    """

    _parameter_constraints = {
        "node_scope": [Interval(Integral, 1, None, closed="left")],
        "reindex": [StrOptions({"cyclic", "sequential"})],
        "node_attr": [str, list, tuple, None],
        "edge_attr": [str, list, tuple, None],
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "max_len": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
    }

    def __init__(self, node_scope=64, reindex="cyclic", node_attr="x", edge_attr="edge_attr", n_bins=16,
                 max_len=None, random_state=None):
        self.node_scope = node_scope
        self.reindex = reindex
        self.node_attr = node_attr
        self.edge_attr = edge_attr
        self.n_bins = n_bins
        self.max_len = max_len
        self.random_state = random_state

    # ----------------------------------------------------------------- fit
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn the vocabulary of ``X``'s attribute values.

        Parameters
        ----------
        X : sequence of graphs or 2-D array
            See :func:`skicml.graph.as_graph_list`; a 2-D numeric array is
            read as feature rows, each a path graph over its features.
        y : None
            Ignored.

        Returns
        -------
        self
        """
        layout = self._input_layout(X)
        X = _coded(X, layout[0], layout[1])
        graphs, from_rows = read_graphs(self, X, reset=True, node_attr=self.node_attr, edge_attr=self.edge_attr)
        if not from_rows:
            self.__dict__.pop("n_features_in_", None)
        return self._fit_graphs(graphs, layout)

    def _input_layout(self, X):
        """What ``inverse_transform`` needs to give ``X``'s attributes back as they were.

        The :class:`_Attribute` records of the networkx graphs of ``X`` (None
        without any) and the dtypes of the ``x`` and ``edge_attr`` arrays of
        its other graphs (None without any), node side then edge side.
        """
        if not is_graph_collection(X):
            return None, None, None, None
        items = list(_series_values(X))
        networkx = [item for item in items if isinstance(item, nx.Graph)]
        others = [item for item in items if not isinstance(item, nx.Graph)]
        layouts = [_networkx_layout(networkx, keys, side) if networkx else None
                   for keys, side in ((self.node_attr, "node"), (self.edge_attr, "edge"))]
        dtypes = []
        for key in ("x", "edge_attr"):
            found = {dtype for dtype in (_array_dtype(item, key) for item in others) if dtype is not None}
            dtypes.append(np.result_type(*found) if found else None)
        return (*layouts, *dtypes)

    def _fit_graphs(self, graphs, layout=(None, None, None, None)):
        self.max_nodes_ = max(g.num_nodes for g in graphs)
        self._check_scope(graphs)
        node_values = np.concatenate([g.x for g in graphs])
        edge_values = np.concatenate([g.edge_attr for g in graphs])
        node_layout, edge_layout, node_dtype, edge_dtype = layout
        self._node_layout = _side_layout(node_layout, node_dtype, node_values.shape[1], "x")
        self._edge_layout = _side_layout(edge_layout, edge_dtype, edge_values.shape[1], "edge_attr")
        self._node_columns = [_Column(f"node{j}", node_values[:, j], self.n_bins)
                              for j in range(node_values.shape[1])]
        self._edge_columns = [_Column(f"edge{j}", edge_values[:, j], self.n_bins)
                              for j in range(edge_values.shape[1])]
        for columns, attributes in ((self._node_columns, self._node_layout), (self._edge_columns, self._edge_layout)):
            for column, names in zip(columns, _label_token_names(attributes)):
                if names is not None:
                    column.labels = names
        self._build_vocab()
        return self

    def _build_vocab(self):
        tokens = list(SPECIAL_TOKENS) + [f"index:{i}" for i in range(self.node_scope)]
        self._column_first_id = []
        for column in self._node_columns + self._edge_columns:
            self._column_first_id.append(len(tokens))
            tokens.extend(column.tokens())
        self.id_to_token_ = tokens
        self.vocab_ = {token: i for i, token in enumerate(tokens)}
        self.vocab_size_ = len(tokens)
        self.n_node_attributes_ = len(self._node_columns)
        self.n_edge_attributes_ = len(self._edge_columns)
        self.n_stacked_ = 2 + self.n_node_attributes_ + self.n_edge_attributes_
        self.node_attributes_ = {a.name: a.dtype for a in self._node_layout}
        self.edge_attributes_ = {a.name: a.dtype for a in self._edge_layout}
        self.node_categories_ = {a.name: a.labels for a in self._node_layout if a.labels is not None}
        self.edge_categories_ = {a.name: a.labels for a in self._edge_layout if a.labels is not None}

    def _check_scope(self, graphs):
        sizes = np.array([g.num_nodes for g in graphs])
        if sizes.max() > self.node_scope:
            i = int(np.argmax(sizes))
            raise ValueError(
                f"graph {i} of X has {sizes[i]} nodes, more than node_scope={self.node_scope} index "
                f"tokens; raise node_scope to at least {sizes.max()}."
            )

    def get_state(self):
        """The fitted vocabulary as plain Python types (stored in checkpoints)."""
        check_is_fitted(self)
        return {
            "params": self.get_params(),
            "max_nodes": int(self.max_nodes_),
            "node_columns": [c.state() for c in self._node_columns],
            "edge_columns": [c.state() for c in self._edge_columns],
            "node_attributes": [a.state() for a in self._node_layout],
            "edge_attributes": [a.state() for a in self._edge_layout],
        }

    @classmethod
    def from_state(cls, state):
        """The fitted tokenizer of :meth:`get_state`."""
        tokenizer = cls(**state["params"])
        tokenizer.max_nodes_ = state["max_nodes"]
        tokenizer._node_columns = [_Column.from_state(s) for s in state["node_columns"]]
        tokenizer._edge_columns = [_Column.from_state(s) for s in state["edge_columns"]]
        # States written before the layout was kept decode to float64 arrays, as they did.
        for side, key, columns in (("node", "x", tokenizer._node_columns),
                                   ("edge", "edge_attr", tokenizer._edge_columns)):
            attributes = state.get(f"{side}_attributes")
            layout = ([_Attribute.from_state(a) for a in attributes] if attributes is not None
                      else _side_layout(None, None, len(columns), key))
            setattr(tokenizer, f"_{side}_layout", layout)
        tokenizer._build_vocab()
        return tokenizer

    # ----------------------------------------------------------- transform
    def transform(self, X):
        """Serialize each graph along one Eulerian walk.

        Parameters
        ----------
        X : sequence of graphs or 2-D array

        Returns
        -------
        ndarray of object, shape (n_graphs,), or ndarray of shape (n_rows, n_columns)
            For graphs: each item an int64 array of shape ``(L_i,
            n_stacked_)``; stack them with :func:`pad_sequences`. For a
            feature matrix: the sequences 0-padded to ``2 * n_features_in_``
            rows and flattened, one row per input row (``n_columns = 2 *
            n_features_in_ * n_stacked_``).
        """
        check_is_fitted(self)
        X = _coded(X, self._node_layout, self._edge_layout)
        graphs, from_rows = read_graphs(self, X, reset=False, node_attr=self.node_attr, edge_attr=self.edge_attr)
        sequences = self._serialize(graphs, view=0)
        if from_rows:
            # Feature rows keep a fixed width: a walk over a path of p nodes
            # has at most 2p - 1 steps, plus the <eos> row.
            return pad_sequences(sequences, max_len=2 * self.n_features_in_).reshape(len(graphs), -1)
        return sequences

    def _check_layout(self, graphs):
        self._check_scope(graphs)
        # Graphs without edges carry no edge attributes to check.
        edge_widths = [g.edge_attr.shape[1] for g in graphs if g.n_edges]
        node_width = graphs[0].x.shape[1]
        edge_width = edge_widths[0] if edge_widths else self.n_edge_attributes_
        if node_width != self.n_node_attributes_ or edge_width != self.n_edge_attributes_:
            raise ValueError(
                f"X has graphs with {node_width} node and {edge_width} edge attributes; the tokenizer was "
                f"fitted on {self.n_node_attributes_} and {self.n_edge_attributes_}."
            )

    def _seeds(self, graphs, view):
        base = seed_from_random_state(self.random_state)
        hashes = np.array([_content_hash(g) for g in graphs], dtype=np.uint64)
        salt = _splitmix(np.uint64(base) * np.uint64(1_000_003) + np.uint64(view))
        return _splitmix(hashes ^ salt)

    def _serialize(self, graphs, view=0):
        """Token arrays of ``graphs`` for augmentation ``view`` (an int)."""
        self._check_layout(graphs)
        n = len(graphs)
        node_counts = np.array([g.num_nodes for g in graphs], dtype=np.int64)
        edge_counts = np.array([g.n_edges for g in graphs], dtype=np.int64)
        node_ptr = np.concatenate([[0], np.cumsum(node_counts)])
        edge_ptr = np.concatenate([[0], np.cumsum(edge_counts)])
        edge_index = np.concatenate([g.edge_index for g in graphs], axis=1)
        seeds = self._seeds(graphs, view)
        nodes, edges, step_ptr = (t.numpy() for t in euler_serialize(
            torch.from_numpy(edge_index), torch.from_numpy(edge_ptr), torch.from_numpy(node_ptr),
            torch.from_numpy(seeds.view(np.int64)),
        ))
        steps = np.diff(step_ptr)
        graph_of_step = np.repeat(np.arange(n), steps)
        global_node = nodes + node_ptr[graph_of_step]

        # Index tokens: order of first appearance within the graph (+ offset).
        _, first_step = np.unique(global_node, return_index=True)
        by_first = np.argsort(first_step, kind="stable")
        rank = np.empty_like(by_first)
        rank[by_first] = np.arange(len(by_first))
        rank -= node_ptr[np.repeat(np.arange(n), node_counts)]
        if self.reindex == "cyclic":
            offset = (_splitmix(seeds ^ np.uint64(0x5851F42D4C957F2D)) % np.uint64(self.node_scope))
            offset = offset.astype(np.int64)
        else:
            offset = np.zeros(n, dtype=np.int64)
        index_token = len(SPECIAL_TOKENS) + (rank[global_node] + offset[graph_of_step]) % self.node_scope

        # Rows: the walk then one <eos> row per graph.
        rows_per_graph = steps + 1
        row_ptr = np.concatenate([[0], np.cumsum(rows_per_graph)])
        step_row = np.arange(len(nodes)) + graph_of_step  # each earlier graph adds one <eos> row
        tokens = np.zeros((int(row_ptr[-1]), self.n_stacked_), dtype=np.int64)
        eos_row = row_ptr[1:] - 1
        tokens[step_row, 0] = index_token
        tokens[eos_row, 0] = EOS
        x_all = np.concatenate([g.x for g in graphs])
        for j, column in enumerate(self._node_columns):
            first_id = self._column_first_id[j]
            tokens[step_row, 1 + j] = column.encode(x_all[global_node, j], first_id)
            tokens[eos_row, 1 + j] = first_id
        arrived = edges >= 0
        global_edge = edges + edge_ptr[graph_of_step]
        e_all = np.concatenate([g.edge_attr for g in graphs]) if self._edge_columns else None
        for j, column in enumerate(self._edge_columns):
            first_id = self._column_first_id[len(self._node_columns) + j]
            values = e_all[np.where(arrived, global_edge, 0), j] if len(e_all) else np.zeros(len(edges))
            col = 1 + self.n_node_attributes_ + j
            tokens[step_row, col] = np.where(arrived, column.encode(values, first_id), first_id)
            tokens[eos_row, col] = first_id
        tokens[step_row, -1] = np.select([edges >= 0, edges == -2], [EDGE, JUMP], START)
        tokens[eos_row, -1] = EOS

        out = np.empty(n, dtype=object)
        out[:] = np.split(tokens, row_ptr[1:-1])
        if self.max_len is not None and rows_per_graph.max() > self.max_len:
            i = int(np.argmax(rows_per_graph))
            raise ValueError(
                f"graph {i} of X serializes to {rows_per_graph[i]} rows, more than max_len={self.max_len}."
            )
        return out

    # --------------------------------------------------- inverse_transform
    def inverse_transform(self, X):
        """Rebuild graphs from token sequences.

        Parameters
        ----------
        X : sequence of int arrays of shape (L_i, F), or 2-D int array
            Sequences from :meth:`transform` (``F = n_stacked_``), possibly
            padded with 0 rows;
            the flattened rows of the feature-matrix path are accepted too.

        Returns
        -------
        list of networkx.Graph
            Nodes ``0..n-1`` in order of first appearance, isomorphic to
            the serialized graph, whatever kind of graph ``fit`` read. The
            attributes come back under the keys ``fit`` read (see
            ``node_attributes_``; ``"x"`` and ``"edge_attr"`` arrays, empty
            ones too, for graphs given as arrays), each value as it was:
            Python scalars as Python scalars, NumPy scalars and arrays in
            their dtype (arrays of strings in the widest string dtype
            seen), labels as the labels. Binned float columns give their
            bin means. A column default (a value unseen in ``fit``) gives
            NaN, which turns an integer value into a float one, or ``None``
            for a label.
        """
        check_is_fitted(self)
        if isinstance(X, np.ndarray) and X.dtype != object and X.ndim == 2:
            if X.shape[1] % self.n_stacked_:
                raise ValueError(
                    f"X has {X.shape[1]} columns; the flattened rows of transform have a multiple of "
                    f"n_stacked_={self.n_stacked_} (pass a list of (L, {self.n_stacked_}) sequences otherwise)."
                )
            X = X.reshape(len(X), -1, self.n_stacked_)
        return [self._decode(np.asarray(sequence), i) for i, sequence in enumerate(X)]

    def _decode(self, tokens, position):
        if tokens.ndim != 2 or tokens.shape[1] != self.n_stacked_:
            raise ValueError(
                f"sequence {position} has shape {tokens.shape}; expected (L, {self.n_stacked_})."
            )
        rows = tokens[(tokens[:, 0] != PAD) & (tokens[:, 0] != EOS)]
        index_ids = rows[:, 0] - len(SPECIAL_TOKENS)
        if np.any((index_ids < 0) | (index_ids >= self.node_scope)):
            raise ValueError(f"sequence {position} has a non-index token in its node column.")
        graph = nx.Graph()
        node_of = {}
        dn = self.n_node_attributes_
        for row, index in zip(rows, index_ids):
            if index not in node_of:
                node = node_of[index] = len(node_of)
                values = np.array([c.decode(row[1 + j], self._column_first_id[j])
                                   for j, c in enumerate(self._node_columns)], dtype=np.float64)
                graph.add_node(node)
                graph.nodes[node].update(_attribute_values(values, self._node_layout))
        previous = None
        for row, index in zip(rows, index_ids):
            node = node_of[index]
            if row[-1] == EDGE and previous is not None and not graph.has_edge(previous, node):
                values = np.array([c.decode(row[1 + dn + j], self._column_first_id[dn + j])
                                   for j, c in enumerate(self._edge_columns)], dtype=np.float64)
                graph.add_edge(previous, node)
                graph.edges[previous, node].update(_attribute_values(values, self._edge_layout))
            previous = node
        return graph

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = []
        return tags
