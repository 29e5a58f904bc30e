"""``skicml::euler_serialize``: GraphGPT's Eulerian-path serialization of graphs.

Used by one family: ``graph`` (GraphGPT's tokenizer).

GraphGPT turns a graph into a token sequence by walking an Eulerian path of an
"Eulerized" copy of it (spec section 2.1). This op does that for a batch of
graphs in one call: for graph ``g`` the rows ``step_ptr[g]:step_ptr[g+1]`` of
``nodes`` and ``edges`` list the visited local node and the local id of the
edge used to arrive there (``-1`` on the graph's first row, ``-2`` on the
first row of each further connected component, a "jump").

Two implementations give identical output for the same seed:

- :func:`euler_serialize_reference`: plain Python, the readable ground truth;
- ``_euler_kernel.c``: the same algorithm in C99, compiled on first use with
  the system C compiler and loaded with :mod:`ctypes`; the CPU kernel of the
  op. Without a working compiler the op warns once and runs the reference.

The official code Eulerizes with ``nx.eulerize`` (a minimum-weight matching of
the odd vertices, cubic in their number). Here a T-join on a BFS spanning
tree is used instead: linear time, at most ``n - 1`` duplicated edges, paths
a few percent longer (spec section 8).

Algorithm and random draws
--------------------------
The generator is splitmix64, one state per graph, started at the graph's seed
taken as an unsigned 64-bit integer::

    state += 0x9E3779B97F4A7C15
    z = state
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB
    next() = z ^ (z >> 31)                     (all modulo 2**64)

and a random index in ``[0, k)`` is ``next() % k``. Per graph, the draws come
in exactly this order (both implementations must keep it):

1. Edge shuffle: ``perm = [0, ..., E-1]``; for ``i = E-1`` down to ``1``:
   ``j = next() % (i + 1)``, swap ``perm[i]`` and ``perm[j]``. (E - 1 draws,
   none when E < 2.) Adjacency lists are built by visiting the edges in
   ``perm`` order and appending edge ``e = (u, v)`` to ``u``'s list, then to
   ``v``'s list (a self-loop lands twice, back to back, in its node's list).
2. Components: BFS from every not yet visited node in index order; a popped
   node scans its adjacency list in order and appends unvisited neighbours.
   Each component's vertex list is in that discovery order. Then shuffle the
   C components with the same Fisher-Yates convention (C - 1 draws).
3. For each component in the shuffled order, if it has at least one edge
   (a self-loop counts):

   a. ``root = verts[next() % size]`` (one draw, even when ``size == 1``);
   b. BFS from ``root`` (same scan order) gives a spanning tree: every
      non-root vertex's parent and the edge it was discovered through;
   c. parity = degree mod 2 (a self-loop adds 2); for the vertices in reverse
      BFS order, root excluded: if odd, duplicate the tree edge to the parent
      (the copy carries the same edge id) and flip the parent's parity. Every
      degree of the multigraph is then even;
   d. ``start = verts[next() % size]`` (one draw);
   e. iterative Hierholzer from ``start`` on the multigraph, in which a
      vertex's adjacency is its original list followed by its duplicates in
      the order they were made; the circuit is cut right after the step that
      covers the last original edge not covered before.

   A component without edges is one row and uses no draw.
4. The components' rows are concatenated in the shuffled order.

Row bound: a component with edges gives at most ``E_c + D_c + 1 <= E_c + n_c``
rows (``D_c <= n_c - 1`` duplicates), one without edges gives ``1 = n_c``; so
a graph never has more than ``E + n`` rows, which is what the C kernel's
output buffer is sized to.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import torch

from ._dispatch import C_FLAGS, gpu_kernels_enabled, load_c_kernel, reset_c_kernel

__all__ = ["euler_serialize", "euler_serialize_reference"]

_MASK = (1 << 64) - 1
_KERNEL_SOURCE = Path(__file__).with_name("_euler_kernel.c")
_LIBRARY = "euler_kernel"
_CFLAGS = C_FLAGS


# --------------------------------------------------------------------------
# Input checks shared by the reference and the op


def _check_inputs(edge_index, edge_ptr, node_ptr, seeds):
    """Validate the op's inputs; return them as numpy arrays (zero-copy)."""
    named = {"edge_index": edge_index, "edge_ptr": edge_ptr, "node_ptr": node_ptr, "seeds": seeds}
    for name, tensor in named.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"euler_serialize: {name} must be a torch.Tensor, got {type(tensor).__name__}.")
        if tensor.dtype != torch.int64:
            raise ValueError(f"euler_serialize: {name} must be an int64 tensor, got {tensor.dtype}.")
        if tensor.device.type != "cpu":
            raise ValueError(f"euler_serialize: {name} must be on the CPU, got device {tensor.device}.")
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(
            f"euler_serialize: edge_index must have shape (2, E_total), got {tuple(edge_index.shape)}."
        )
    if seeds.dim() != 1:
        raise ValueError(f"euler_serialize: seeds must have shape (G,), got {tuple(seeds.shape)}.")
    n_graphs = seeds.shape[0]
    for name in ("edge_ptr", "node_ptr"):
        if tuple(named[name].shape) != (n_graphs + 1,):
            raise ValueError(
                f"euler_serialize: {name} must have shape (G+1,) = ({n_graphs + 1},) for G={n_graphs} "
                f"seeds, got {tuple(named[name].shape)}."
            )
    ei = edge_index.detach().contiguous().numpy()
    eptr = edge_ptr.detach().contiguous().numpy()
    nptr = node_ptr.detach().contiguous().numpy()
    seed_arr = seeds.detach().contiguous().numpy()
    n_edges = ei.shape[1]
    if eptr[0] != 0 or eptr[-1] != n_edges or np.any(np.diff(eptr) < 0):
        raise ValueError(
            f"euler_serialize: edge_ptr must be non-decreasing offsets from 0 to E_total={n_edges}, "
            f"got {_preview(eptr)}."
        )
    sizes = np.diff(nptr)
    if nptr[0] != 0 or np.any(sizes < 1):
        bad = np.flatnonzero(sizes < 1)
        where = f"graph {bad[0]} has {sizes[bad[0]]} nodes" if bad.size else f"node_ptr[0]={nptr[0]}"
        raise ValueError(
            "euler_serialize: node_ptr must be increasing offsets from 0 (every graph needs at least "
            f"one node), got {_preview(nptr)}: {where}."
        )
    if n_edges:
        graph_of_edge = np.repeat(np.arange(n_graphs), np.diff(eptr))
        limit = sizes[graph_of_edge]
        bad = np.flatnonzero(((ei < 0) | (ei >= limit)).any(axis=0))
        if bad.size:
            col = bad[0]
            g = graph_of_edge[col]
            raise ValueError(
                f"euler_serialize: edge_index column {col} (edge {col - eptr[g]} of graph {g}) is "
                f"({ei[0, col]}, {ei[1, col]}), but node ids must be local, in [0, {limit[col]})."
            )
    return ei, eptr, nptr, seed_arr


def _preview(values, k=8):
    shown = ", ".join(map(str, values[:k]))
    return f"[{shown}{', ...' if len(values) > k else ''}]"


# --------------------------------------------------------------------------
# Reference


class _SplitMix64:
    def __init__(self, seed):
        self.state = int(seed) & _MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def index(self, k):
        return self.next() % k


def _shuffle(items, rng):
    for i in range(len(items) - 1, 0, -1):
        j = rng.index(i + 1)
        items[i], items[j] = items[j], items[i]


def _bfs(adj, source, visited):
    """Discovery order from ``source``, and each vertex's (parent, edge) of discovery."""
    visited[source] = True
    order, tree = [source], {source: (-1, -1)}
    head = 0
    while head < len(order):
        v = order[head]
        head += 1
        for w, e in adj[v]:
            if not visited[w]:
                visited[w] = True
                tree[w] = (v, e)
                order.append(w)
    return order, tree


def _eulerize(adj, verts, rng):
    """T-join on a BFS tree from a random root (steps 3a-c of the module doc).

    Returns the duplicates as ``(child, parent, edge)`` in creation order.
    """
    root = verts[rng.index(len(verts))]
    visited = dict.fromkeys(verts, False)
    order, tree = _bfs(adj, root, visited)
    odd = {v: len(adj[v]) % 2 for v in verts}
    duplicates = []
    for v in reversed(order[1:]):
        if odd[v]:
            parent, edge = tree[v]
            duplicates.append((v, parent, edge))
            odd[v] = 0
            odd[parent] ^= 1
    return duplicates


def _hierholzer(adj, duplicates, start, n_edges):
    """Eulerian circuit from ``start`` as (node, arriving edge) pairs, the first edge -1.

    Instances ``0..E-1`` are the original edges, ``E + k`` the k-th duplicate.
    """
    multi = {v: [(w, e, e) for w, e in lst] for v, lst in adj.items()}
    for k, (child, parent, edge) in enumerate(duplicates):
        multi[child].append((parent, edge, n_edges + k))
        multi[parent].append((child, edge, n_edges + k))
    used = set()
    cursor = dict.fromkeys(multi, 0)
    stack, reversed_circuit = [(start, -1)], []
    while stack:
        v = stack[-1][0]
        slots, i = multi[v], cursor[v]
        while i < len(slots) and slots[i][2] in used:
            i += 1
        cursor[v] = i
        if i < len(slots):
            w, edge, instance = slots[i]
            used.add(instance)
            stack.append((w, edge))
        else:
            # Popped vertices form the circuit backwards; each keeps the edge
            # it was reached by, which still joins it to its predecessor
            # once the list is reversed.
            reversed_circuit.append(stack.pop())
    return reversed_circuit[::-1]


def _serialize_graph(n_nodes, src, dst, seed):
    """One graph: rows as two lists, plus the duplicates the T-join made.

    The duplicates (``(child, parent, edge)`` triples, all components) are
    returned for the tests of the Eulerization; the op does not expose them.
    """
    rng = _SplitMix64(seed)
    n_edges = len(src)
    perm = list(range(n_edges))
    _shuffle(perm, rng)
    adj = [[] for _ in range(n_nodes)]
    for e in perm:
        u, v = src[e], dst[e]
        adj[u].append((v, e))
        adj[v].append((u, e))

    visited = [False] * n_nodes
    components = []
    for v in range(n_nodes):
        if not visited[v]:
            components.append(_bfs(adj, v, visited)[0])
    _shuffle(components, rng)

    nodes, edges, all_duplicates = [], [], []
    for verts in components:
        first = -1 if not nodes else -2
        component_edges = sum(len(adj[v]) for v in verts) // 2
        if component_edges == 0:
            nodes.append(verts[0])
            edges.append(first)
            continue
        sub_adj = {v: adj[v] for v in verts}
        duplicates = _eulerize(sub_adj, verts, rng)
        all_duplicates.extend(duplicates)
        start = verts[rng.index(len(verts))]
        circuit = _hierholzer(sub_adj, duplicates, start, n_edges)
        nodes.append(start)
        edges.append(first)
        covered, remaining = set(), component_edges
        for node, edge in circuit[1:]:
            nodes.append(node)
            edges.append(edge)
            if edge not in covered:
                covered.add(edge)
                remaining -= 1
                if remaining == 0:
                    break
    return nodes, edges, all_duplicates


def euler_serialize_reference(edge_index, edge_ptr, node_ptr, seeds):
    """Eulerian-path serialization of a batch of graphs in plain Python.

    The ground truth of :func:`euler_serialize` (identical output for the
    same seeds); see the module docstring for the algorithm.

    Parameters
    ----------
    edge_index : torch.Tensor of shape (2, E_total), int64
        Undirected edges of all graphs, each listed once, node ids local to
        their graph. Self-loops are allowed.
    edge_ptr, node_ptr : torch.Tensor of shape (G+1,), int64
        Offsets of each graph's edge columns and nodes; every graph has at
        least one node.
    seeds : torch.Tensor of shape (G,), int64
        One random seed per graph.

    Returns
    -------
    nodes, edges : torch.Tensor of shape (R,), int64
        Visited local node and local id of the edge it was reached by
        (``-1`` first row of a graph, ``-2`` first row of a further component).
    step_ptr : torch.Tensor of shape (G+1,), int64
        Graph ``g`` owns rows ``step_ptr[g]:step_ptr[g+1]``.
    """
    ei, eptr, nptr, seed_arr = _check_inputs(edge_index, edge_ptr, node_ptr, seeds)
    nodes, edges, step_ptr = [], [], [0]
    for g in range(len(seed_arr)):
        lo, hi = int(eptr[g]), int(eptr[g + 1])
        graph_nodes, graph_edges, _ = _serialize_graph(
            int(nptr[g + 1] - nptr[g]), ei[0, lo:hi].tolist(), ei[1, lo:hi].tolist(), int(seed_arr[g])
        )
        nodes.extend(graph_nodes)
        edges.extend(graph_edges)
        step_ptr.append(len(nodes))
    return tuple(torch.tensor(values, dtype=torch.int64) for values in (nodes, edges, step_ptr))


# --------------------------------------------------------------------------
# Compiled kernel


def _bind(library):
    kernel = library.euler_serialize_batch
    kernel.restype = ctypes.c_int64
    kernel.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 8
    return kernel


def _load_kernel():
    """The ctypes function of the compiled kernel, or None (warned once) when unavailable."""
    return load_c_kernel(_LIBRARY, _KERNEL_SOURCE, _bind, op="skicml::euler_serialize",
                         fallback="its slow pure-Python reference", flags=_CFLAGS)


def _reset_kernel():
    """Forget the loaded kernel (and the fallback decision); for tests."""
    reset_c_kernel(_LIBRARY)


def _run_kernel(kernel, ei, eptr, nptr, seed_arr):
    n_graphs = len(seed_arr)
    max_rows = int(ei.shape[1] + nptr[-1])
    nodes = np.empty(max_rows, dtype=np.int64)
    edges = np.empty(max_rows, dtype=np.int64)
    step_ptr = np.empty(n_graphs + 1, dtype=np.int64)
    ei = np.ascontiguousarray(ei)
    total = kernel(
        n_graphs, ei[0].ctypes.data, ei[1].ctypes.data,
        eptr.ctypes.data, nptr.ctypes.data, seed_arr.ctypes.data,
        nodes.ctypes.data, edges.ctypes.data, step_ptr.ctypes.data,
    )
    if total < 0:
        raise MemoryError("euler_serialize: the C kernel could not allocate its work space.")
    return (torch.from_numpy(nodes[:total].copy()), torch.from_numpy(edges[:total].copy()),
            torch.from_numpy(step_ptr))


# --------------------------------------------------------------------------
# The op


@torch.library.custom_op("skicml::euler_serialize", mutates_args=())
def euler_serialize(
    edge_index: torch.Tensor, edge_ptr: torch.Tensor, node_ptr: torch.Tensor, seeds: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eulerian-path serialization of a batch of graphs (GraphGPT).

    Each graph is Eulerized (T-join on a BFS tree), walked from a random node
    with Hierholzer's algorithm, and the walk is cut after the last new edge;
    connected components come in random order, joined by jumps. See the
    module docstring for the exact algorithm. Runs a compiled C kernel; the
    output equals :func:`euler_serialize_reference` for the same seeds.

    Parameters
    ----------
    edge_index : torch.Tensor of shape (2, E_total), int64, CPU
        Undirected edges of all graphs concatenated, each listed once, node
        ids local to their graph (``0..n_g-1``). Self-loops are allowed.
    edge_ptr : torch.Tensor of shape (G+1,), int64
        Graph ``g``'s edges are columns ``edge_ptr[g]:edge_ptr[g+1]``.
    node_ptr : torch.Tensor of shape (G+1,), int64
        Graph ``g`` has ``node_ptr[g+1] - node_ptr[g] >= 1`` nodes.
    seeds : torch.Tensor of shape (G,), int64
        One seed per graph; the same seed gives the same walk.

    Returns
    -------
    nodes : torch.Tensor of shape (R,), int64
        Local node visited at each row.
    edges : torch.Tensor of shape (R,), int64
        Local edge id (column offset within the graph) used to arrive at the
        row's node; ``-1`` on a graph's first row, ``-2`` on the first row of
        each further connected component (a jump).
    step_ptr : torch.Tensor of shape (G+1,), int64
        Graph ``g`` owns rows ``step_ptr[g]:step_ptr[g+1]``; every node of
        it appears in at least one of them.

    Raises
    ------
    ValueError
        On wrong shapes, dtypes or devices, a graph without nodes, or a node
        id outside its graph.
    """
    arrays = _check_inputs(edge_index, edge_ptr, node_ptr, seeds)
    kernel = _load_kernel() if gpu_kernels_enabled() else None
    if kernel is None:
        return euler_serialize_reference(edge_index, edge_ptr, node_ptr, seeds)
    return _run_kernel(kernel, *arrays)


@euler_serialize.register_fake
def _(edge_index, edge_ptr, node_ptr, seeds):
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(
            f"euler_serialize: edge_index must have shape (2, E_total), got {tuple(edge_index.shape)}."
        )
    # The number of rows depends on the walks, known only after running them.
    rows = torch.library.get_ctx().new_dynamic_size()
    nodes = edge_index.new_empty(rows)
    return nodes, edge_index.new_empty(rows), seeds.new_empty(seeds.shape[0] + 1)
