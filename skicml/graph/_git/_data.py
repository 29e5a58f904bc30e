"""What the GIT estimators read: task sets over graphs, node features from numbers or texts, and the batches.

A *task set* is a graph (node and edge tasks) or a collection of graphs
(graph tasks) and the task instances on it. :func:`read_task_graph` turns
one or more of them into a :class:`TaskGraph`: one disjoint union of the
graphs with its node features and, for every task, the roots of its
task-tree. :meth:`TaskGraph.batch` samples the computation trees of a batch
of tasks (:func:`~._task_trees.sample_neighbors`), which is all the
networks ever see.

Node features are numeric (a graph's ``x``) or texts (a networkx node
attribute or a graph dict's key, ``"text"`` by default) that a text encoder
turns into vectors (:mod:`._text`). Rows of a plain 2-D array are nodes of a
k-nearest-neighbour graph (:func:`knn_task_graph`), so that the estimators
run on tabular data and scikit-learn's checks run at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import torch

from .._graphs import as_graph_list, is_graph_collection
from ._task_trees import TASKS, csr_adjacency, sample_neighbors, task_roots

__all__ = ["ReadTaskSet", "TaskGraph", "TaskSet", "build_task_graph", "features_of", "knn_task_graph", "node_texts",
           "read_task_graph", "read_task_sets", "task_index", "texts_of"]


@dataclass
class TaskSet:
    """Task instances on a graph, what :class:`GITEncoder` pretrains on.

    Parameters
    ----------
    graph : graph or sequence of graphs
        One graph for node and edge tasks (a networkx graph, a
        torch_geometric ``Data`` or a graph dict); a sequence of graphs (or
        SMILES) for graph tasks. Node features are its numeric ``x`` or its
        node texts (see the estimators' ``node_text``).
    task : {"node", "edge", "graph"}, default="node"
    index : array-like or None, default=None
        Node ids ``(n,)`` for node tasks and node pairs ``(n, 2)`` for edge
        tasks, positions in the graph's node order; ``None`` takes every
        node, every edge, or every graph.

    Examples
    --------
    >>> import networkx as nx
    >>> from skicml.graph import TaskSet
    >>> TaskSet(nx.karate_club_graph(), task="edge").task
    'edge'
    """

    graph: object
    task: str = "node"
    index: object = None

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"TaskSet task={self.task!r}; expected one of {TASKS}.")
        collection = is_graph_collection(self.graph)
        if self.task == "graph" and not collection:
            raise TypeError("A TaskSet of graph tasks holds a sequence of graphs (a list, or SMILES strings).")
        if self.task != "graph" and collection:
            raise TypeError(f"A TaskSet of {self.task} tasks holds one graph, not a sequence of graphs.")


def node_texts(item, node_text):
    """``(graph without its texts, texts or None)`` for one input graph."""
    if node_text is None:
        return item, None
    if isinstance(item, nx.Graph):
        values = [data.get(node_text) for _, data in item.nodes(data=True)]
        if all(value is None for value in values):
            return item, None
        if not all(isinstance(value, str) for value in values):
            raise ValueError(f"Some nodes have a {node_text!r} attribute and some do not, or it is not a string.")
        return item, values
    if type(item) is dict and node_text in item:
        texts = list(item[node_text])
        rest = {key: value for key, value in item.items() if key != node_text}
        rest.setdefault("num_nodes", len(texts))
        return rest, texts
    return item, None


def _read_graphs(items, node_attr, node_text, edge_attr=None):
    split = [node_texts(item, node_text) for item in items]
    graphs = as_graph_list([graph for graph, _ in split], node_attr=node_attr, edge_attr=edge_attr)
    if edge_attr is None:  # dicts, PyG Data and SMILES carry theirs anyway: the encoder ignores them
        for graph in graphs:
            graph.edge_attr = graph.edge_attr[:, :0]
    texts = [texts for _, texts in split]
    for position, (graph, these) in enumerate(zip(graphs, texts)):
        if these is not None and len(these) != graph.num_nodes:
            raise ValueError(f"graph {position} has {len(these)} node texts for {graph.num_nodes} nodes.")
    return graphs, texts


def features_of(graphs, texts, text_encoder, *, from_smiles=None):
    """Node features of every graph: the encoded texts when it has texts, its numeric ``x`` otherwise."""
    out = []
    for position, (graph, these) in enumerate(zip(graphs, texts)):
        if these is not None:
            if text_encoder is None:
                raise ValueError(
                    f"graph {position} has node texts but text_encoder=None; pass text_encoder='tfidf-svd', "
                    "'minilm' or a callable to read them."
                )
            out.append(text_encoder.encode(these))
        elif graph.x.shape[1] == 0:
            raise ValueError(
                f"graph {position} has no node features: give its nodes numeric features ('x') or texts "
                "(node_text) with a text_encoder. For a bare structure, node degrees or one-hot ids are a start."
            )
        else:
            out.append(graph.x.astype(np.float32))
    widths = sorted({features.shape[1] for features in out})
    if len(widths) > 1:
        raise ValueError(f"The graphs' node features have different widths {widths}; one width is needed.")
    return out


@dataclass
class TaskGraph:
    """A disjoint union of graphs with node features and the roots of every task.

    Attributes
    ----------
    x : torch.Tensor of shape (n_nodes, n_features), float32
    indptr, neighbors : torch.Tensor
        Every node's in-neighbours (the nodes it hears from) in CSR form.
    root_ptr : torch.Tensor of shape (n_tasks + 1,)
    roots : torch.Tensor
        The roots of task ``t`` are ``roots[root_ptr[t]:root_ptr[t + 1]]``.
    edge_attr : torch.Tensor of shape (n_directed_edges, n_edge_features) or None
        The features of every CSR entry (both directions of an edge share
        them), or ``None`` when the encoder reads no edge features.
    """

    x: torch.Tensor
    indptr: torch.Tensor
    neighbors: torch.Tensor
    root_ptr: torch.Tensor
    roots: torch.Tensor
    edge_attr: torch.Tensor = None

    @property
    def edge_dim(self):
        """Width of the edge features (0 without)."""
        return 0 if self.edge_attr is None else int(self.edge_attr.shape[1])

    @property
    def n_tasks(self):
        return len(self.root_ptr) - 1

    @property
    def n_nodes(self):
        return len(self.x)

    def for_tasks(self, task, index):
        """The same graph with the node or edge tasks ``index`` (node ids, or node pairs), checked."""
        index = task_index(task, index, self.n_nodes)
        task_of_root, roots = task_roots(task, self.n_nodes, index)
        root_ptr, roots = _roots_ptr(task_of_root, roots, len(index))
        return TaskGraph(self.x, self.indptr, self.neighbors, root_ptr, roots, self.edge_attr)

    def batch(self, tasks, fanouts, generator=None):
        """The sampled computation trees of ``tasks`` (without edge features: :meth:`sample` has them).

        Returns
        -------
        x : torch.Tensor
            Features of the sampled nodes.
        edge_index : torch.Tensor
            Local (source, target) messages.
        task_of_root, roots : torch.Tensor
            The tasks' roots in local ids, for :meth:`GITModel.task_embeddings`.
        """
        x, edge_index, _, task_of_root, local_roots = self.sample(tasks, fanouts, generator)
        return x, edge_index, task_of_root, local_roots

    def sample(self, tasks, fanouts, generator=None):
        """:meth:`batch` with the sampled edges' features: ``(x, edge_index, edge_attr or None,
        task_of_root, roots)``."""
        tasks = torch.as_tensor(tasks, dtype=torch.int64).reshape(-1).cpu()
        starts, counts = self.root_ptr[tasks], self.root_ptr[tasks + 1] - self.root_ptr[tasks]
        task_of_root = torch.repeat_interleave(torch.arange(len(tasks)), counts)
        offsets = torch.arange(int(counts.sum())) - torch.repeat_interleave(counts.cumsum(0) - counts, counts)
        roots = self.roots[starts[task_of_root] + offsets]
        seeds, local_roots = torch.unique(roots, return_inverse=True)
        sample = sample_neighbors(self.indptr, self.neighbors, seeds, fanouts, generator=generator)
        edge_attr = None if self.edge_attr is None else self.edge_attr[sample.positions]
        return self.x[sample.nodes], sample.edge_index, edge_attr, task_of_root, local_roots


def _roots_ptr(task_of_root, roots, n_tasks):
    order = torch.argsort(task_of_root, stable=True)
    ptr = torch.zeros(n_tasks + 1, dtype=torch.int64)
    ptr[1:] = torch.bincount(task_of_root, minlength=n_tasks).cumsum(0)
    return ptr, roots[order]


def task_index(task, index, num_nodes):
    """``index`` of one task set as an int64 tensor (node ids or node pairs), checked."""
    if index is None:
        return None
    values = np.asarray(index)
    if values.dtype == object or not (np.issubdtype(values.dtype, np.integer) or values.size == 0):
        if np.issubdtype(values.dtype, np.floating) and values.size and np.all(values == np.round(values)):
            values = values.astype(np.int64)
        else:
            raise ValueError(f"{task}-task indices must be integer node ids, got dtype {values.dtype}.")
    if task == "node":
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
        if values.ndim != 1:
            raise ValueError(f"node-task indices must be node ids of shape (n,) or (n, 1), got {values.shape}.")
    elif values.ndim != 2 or values.shape[1] != 2:
        raise ValueError(f"edge-task indices must be node pairs of shape (n, 2), got {values.shape}.")
    if len(values) == 0:
        raise ValueError(f"No {task} tasks: the index is empty.")
    tensor = torch.as_tensor(values.astype(np.int64))
    if int(tensor.min()) < 0 or int(tensor.max()) >= num_nodes:
        bad = tensor[(tensor < 0) | (tensor >= num_nodes)].reshape(-1)[:5].tolist()
        raise ValueError(f"{task}-task indices refer to nodes {bad} outside the graph's 0..{num_nodes - 1}.")
    return tensor


@dataclass
class ReadTaskSet:
    """One task set's graphs in the shared format, their node texts (or ``None``) and its task."""

    task: str
    index: object
    graphs: list
    texts: list


def read_task_sets(task_sets, *, node_attr="x", node_text="text", edge_attr=None):
    """The graphs and node texts of ``task_sets`` (before any text is encoded); edge features only when
    ``edge_attr`` is not None."""
    out = []
    for task_set in task_sets:
        items = task_set.graph if task_set.task == "graph" else [task_set.graph]
        items = list(items.values if hasattr(items, "iloc") else items)
        graphs, texts = _read_graphs(items, node_attr, node_text, edge_attr)
        out.append(ReadTaskSet(task_set.task, task_set.index, graphs, texts))
    if not out:
        raise ValueError("No task sets to read.")
    return out


def texts_of(read_sets):
    """Every node text of ``read_sets``, in order (what a TF-IDF encoder is fitted on)."""
    return [text for read in read_sets for these in read.texts if these is not None for text in these]


def build_task_graph(read_sets, text_encoder):
    """One :class:`TaskGraph` of read task sets: their graphs side by side, tasks in order."""
    xs, edges, edge_features, task_parts, root_parts, offset, n_tasks = [], [], [], [], [], 0, 0
    for read in read_sets:
        graphs = read.graphs
        features = features_of(graphs, read.texts, text_encoder)
        sizes = [graph.num_nodes for graph in graphs]
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        for graph, start, features_ in zip(graphs, starts, features):
            xs.append(features_)
            edges.append(torch.as_tensor(graph.edge_index + start + offset))
            edge_features.append(graph.edge_attr)
        total = int(sum(sizes))
        if read.task == "graph":
            if min(sizes) == 0:
                raise ValueError(f"graph {sizes.index(0)} has no nodes; a graph task needs at least one node.")
            graph_ids = torch.repeat_interleave(torch.arange(len(graphs)), torch.as_tensor(sizes))
            task_of_root, roots = task_roots("graph", total, graph_ids=graph_ids)
        else:
            index = task_index(read.task, read.index, total)
            edge_index = torch.as_tensor(graphs[0].edge_index)
            if read.task == "edge" and index is None and edge_index.shape[1] == 0:
                raise ValueError("No edge tasks: the graph has no edges.")
            task_of_root, roots = task_roots(read.task, total, index, edge_index=edge_index)
        task_parts.append(task_of_root + n_tasks)
        root_parts.append(roots + offset)
        n_tasks += int(task_of_root.max()) + 1
        offset += total
    widths = sorted({features.shape[1] for features in xs})
    if len(widths) > 1:
        raise ValueError(f"The task sets' node features have different widths {widths}; one width is needed.")
    x = torch.as_tensor(np.concatenate(xs), dtype=torch.float32)
    edge_widths = sorted({e.shape[1] for e in edge_features if len(e)})
    if len(edge_widths) > 1:
        raise ValueError(f"The task sets' edge features have different widths {edge_widths}; one width is needed.")
    indptr, neighbors, edge_ids = csr_adjacency(torch.cat(edges, dim=1), offset, return_edge_ids=True)
    edge_attr = None
    if edge_widths and edge_widths[0] > 0:
        width = edge_widths[0]
        table = np.concatenate([e if len(e) else np.zeros((0, width)) for e in edge_features])
        if not np.isfinite(table).all():
            raise ValueError("The edge features contain NaN or infinite values.")
        edge_attr = torch.as_tensor(table, dtype=torch.float32)[edge_ids]
    root_ptr, roots = _roots_ptr(torch.cat(task_parts), torch.cat(root_parts), n_tasks)
    return TaskGraph(x, indptr, neighbors, root_ptr, roots, edge_attr)


def read_task_graph(task_sets, text_encoder, *, node_attr="x", node_text="text", edge_attr=None):
    """One :class:`TaskGraph` of several task sets (their graphs side by side, tasks in order)."""
    return build_task_graph(read_task_sets(task_sets, node_attr=node_attr, node_text=node_text,
                                           edge_attr=edge_attr), text_encoder)


def knn_task_graph(train_rows, neighbors_model, n_neighbors, rows=None):
    """Rows of a feature matrix as nodes of a k-nearest-neighbour graph, one node task per row.

    Without ``rows``: the symmetric graph over ``train_rows`` (each row
    linked to its ``n_neighbors`` nearest others), tasks = the training
    rows. With ``rows``: the training graph plus one new node per row that
    hears from its nearest training rows and is heard by none, so that its
    prediction does not depend on the other rows it comes with; tasks =
    the new rows.
    """
    n_train = len(train_rows)
    k = min(n_neighbors, n_train - 1)
    if k > 0:
        neighbor_ids = neighbors_model.kneighbors(train_rows, n_neighbors=k + 1, return_distance=False)[:, 1:]
        source = torch.as_tensor(neighbor_ids.reshape(-1), dtype=torch.int64)
        target = torch.arange(n_train).repeat_interleave(k)
        messages = torch.cat([torch.stack([source, target]), torch.stack([target, source])], dim=1)
    else:
        messages = torch.zeros((2, 0), dtype=torch.int64)
    if rows is None:
        x, tasks = train_rows, torch.arange(n_train)
    else:
        k_new = min(n_neighbors, n_train)
        nearest = neighbors_model.kneighbors(rows, n_neighbors=k_new, return_distance=False)
        new = torch.arange(len(rows)) + n_train
        links = torch.stack([torch.as_tensor(nearest.reshape(-1), dtype=torch.int64), new.repeat_interleave(k_new)])
        messages = torch.cat([messages, links], dim=1)
        x, tasks = np.concatenate([train_rows, rows]), new
    x = torch.as_tensor(np.asarray(x), dtype=torch.float32)
    indptr, neighbor_list = csr_adjacency(messages, len(x), directed=True)
    return TaskGraph(x, indptr, neighbor_list, torch.arange(len(tasks) + 1), tasks)

