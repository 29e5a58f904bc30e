"""Task-trees: the message-passing trees of the nodes a task is about, joined under a virtual task node.

GIT (Wang et al., ICML 2025) casts every task instance as one tree: a node
task is the computation tree of its node, an edge task joins the trees of
its two end nodes, a graph task the trees of all its nodes, each time under
a virtual *task node* linked to those roots. Pretraining adds the task nodes
to the graph (:func:`add_task_nodes`) and samples their neighbourhoods
(:func:`sample_neighbors`); adaptation takes the mean of the roots'
embeddings directly (:func:`task_roots`), which equals one mean aggregation
at the task node.

Everything here is vectorised tensor code: the official construction loops
over edges in Python, and PyG's ``NeighborLoader`` needs compiled extensions
that do not install from PyPI.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["SampledSubgraph", "add_task_nodes", "csr_adjacency", "sample_neighbors", "task_roots"]

TASKS = ("node", "edge", "graph")


def _check_nodes(ids, num_nodes, what):
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
        bad = ids[(ids < 0) | (ids >= num_nodes)][:5].tolist()
        raise ValueError(f"{what} refer to nodes {bad} outside the graph's 0..{num_nodes - 1}.")


def csr_adjacency(edge_index, num_nodes, *, directed=False, return_edge_ids=False):
    """Both directions of every edge as a CSR structure ``(indptr, neighbors)``, neighbours sorted.

    Parameters
    ----------
    edge_index : torch.Tensor of shape (2, n_edges), int64
        Each undirected edge once or in both directions (duplicates are
        merged); self-loops are kept once.
    num_nodes : int
    directed : bool, default=False
        Read ``edge_index`` as (source, target) messages and list each
        node's sources only: how new nodes hear from a graph that does not
        hear from them.
    return_edge_ids : bool, default=False
        Also return, for every CSR entry, the column of ``edge_index`` it
        comes from (the first one, when an edge is listed more than once):
        what lines edge features up with the entries.

    Returns
    -------
    indptr : torch.Tensor of shape (num_nodes + 1,)
        The neighbours of node ``v`` are ``neighbors[indptr[v]:indptr[v + 1]]``.
    neighbors : torch.Tensor of shape (n_directed_edges,)
    edge_ids : torch.Tensor of shape (n_directed_edges,)
        Only with ``return_edge_ids``.
    """
    edge_index = torch.as_tensor(edge_index, dtype=torch.int64)
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape (2, n_edges), got {tuple(edge_index.shape)}.")
    _check_nodes(edge_index.reshape(-1), num_nodes, "edge_index entries")
    both = edge_index.flip(0) if directed else torch.cat([edge_index, edge_index.flip(0)], dim=1)
    keys, inverse = torch.unique(both[0] * num_nodes + both[1], return_inverse=True)  # sorted by node, neighbour
    source, neighbors = keys // num_nodes, keys % num_nodes
    indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
    indptr[1:] = torch.bincount(source, minlength=num_nodes).cumsum(0)
    if not return_edge_ids:
        return indptr, neighbors
    columns = torch.arange(both.shape[1]) % max(edge_index.shape[1], 1)
    edge_ids = torch.full((len(keys),), both.shape[1], dtype=torch.int64)
    edge_ids.scatter_reduce_(0, inverse, columns, reduce="amin")
    return indptr, neighbors, edge_ids


@dataclass
class SampledSubgraph:
    """The sampled neighbourhood of some seed nodes, relabelled to local ids.

    Attributes
    ----------
    nodes : torch.Tensor of shape (n_nodes,)
        Global ids; the seeds come first, in the order given, then each
        hop's new nodes.
    edge_index : torch.Tensor of shape (2, n_edges)
        Local ``(neighbour, target)`` pairs: messages flow from row 0 to
        row 1, as in PyG.
    n_seeds : int
    hop_sizes : list of int
        Nodes added by each hop (the seeds are hop 0).
    positions : torch.Tensor of shape (n_edges,) or None
        The CSR entry (a position in ``neighbors``) of every sampled edge:
        where its edge features are.
    """

    nodes: torch.Tensor
    edge_index: torch.Tensor
    n_seeds: int
    hop_sizes: list
    positions: torch.Tensor = None


def _choose_per_segment(segment, n_segments, limit, generator):
    """Positions to keep: at most ``limit`` uniformly chosen without replacement in every segment.

    ``segment`` is sorted; a segment no longer than ``limit`` keeps all of it.
    """
    if limit < 0:
        return torch.ones_like(segment, dtype=torch.bool)
    key = torch.rand(segment.shape, generator=generator, dtype=torch.float64)
    order = torch.argsort(segment.double() + key)  # random order inside each segment, segments kept in order
    starts = torch.zeros(n_segments + 1, dtype=torch.int64)
    starts[1:] = torch.bincount(segment, minlength=n_segments).cumsum(0)
    rank = torch.arange(len(segment)) - starts[segment[order]]
    keep = torch.zeros_like(segment, dtype=torch.bool)
    keep[order[rank < limit]] = True
    return keep


def sample_neighbors(indptr, neighbors, seeds, fanouts, *, generator=None):
    """Sample the neighbourhoods of ``seeds``, hop by hop, without replacement (PyG ``NeighborLoader``'s rule).

    At hop ``h`` every node reached at hop ``h - 1`` draws ``fanouts[h - 1]``
    distinct neighbours (all of them when it has fewer, or when the fan-out
    is ``-1``). Nodes already in the sample are not added again, but their
    sampled edges are kept.

    Parameters
    ----------
    indptr, neighbors : torch.Tensor
        From :func:`csr_adjacency`.
    seeds : torch.Tensor of shape (n_seeds,)
        Distinct global node ids.
    fanouts : sequence of int
        One per hop.
    generator : torch.Generator or None

    Returns
    -------
    SampledSubgraph
    """
    num_nodes = len(indptr) - 1
    seeds = torch.as_tensor(seeds, dtype=torch.int64).reshape(-1)
    _check_nodes(seeds, num_nodes, "seeds")
    if len(torch.unique(seeds)) != len(seeds):
        raise ValueError("seeds must be distinct node ids.")
    local = torch.full((num_nodes,), -1, dtype=torch.int64)
    local[seeds] = torch.arange(len(seeds))
    nodes, frontier, sources, targets, hop_sizes, kept = [seeds], seeds, [], [], [len(seeds)], []
    for fanout in fanouts:
        degree = indptr[frontier + 1] - indptr[frontier]
        segment = torch.repeat_interleave(torch.arange(len(frontier)), degree)
        offsets = torch.arange(len(segment)) - torch.repeat_interleave(degree.cumsum(0) - degree, degree)
        position = indptr[frontier][segment] + offsets
        keep = _choose_per_segment(segment, len(frontier), int(fanout), generator)
        target, neighbor = frontier[segment[keep]], neighbors[position[keep]]
        kept.append(position[keep])
        unseen = neighbor[local[neighbor] < 0]
        fresh, inverse = torch.unique(unseen, return_inverse=True)
        # New nodes in order of first appearance, so ids do not depend on unique's sorting.
        first = torch.full((len(fresh),), len(unseen), dtype=torch.int64)
        first.scatter_reduce_(0, inverse, torch.arange(len(unseen)), reduce="amin")
        new = fresh[torch.argsort(first)]
        local[new] = torch.arange(len(new)) + sum(hop_sizes)
        nodes.append(new)
        hop_sizes.append(len(new))
        sources.append(local[neighbor])
        targets.append(local[target])
        frontier = new
    edge_index = torch.stack([torch.cat(sources), torch.cat(targets)]) if sources else torch.zeros(
        (2, 0), dtype=torch.int64)
    positions = torch.cat(kept) if kept else torch.zeros(0, dtype=torch.int64)
    return SampledSubgraph(torch.cat(nodes), edge_index, len(seeds), hop_sizes[1:], positions)


def add_task_nodes(edge_index, num_nodes, task, index=None, *, graph_ids=None):
    """The graph with one virtual task node per task instance, linked to the nodes the task is about.

    Parameters
    ----------
    edge_index : torch.Tensor of shape (2, n_edges)
    num_nodes : int
    task : {"node", "edge", "graph"}
    index : torch.Tensor or None
        Node ids ``(n,)`` for node tasks (``None``: every node), node pairs
        ``(n, 2)`` for edge tasks (``None``: every edge of ``edge_index``);
        unused for graph tasks.
    graph_ids : torch.Tensor of shape (num_nodes,) or None
        For graph tasks: the graph of every node of a disjoint union (one
        task node per graph id ``0..max``).

    Returns
    -------
    edge_index : torch.Tensor
        The input edges, then each task node's links ``(task node, root)``
        once (undirected).
    task_nodes : torch.Tensor of shape (n_tasks,)
        Their ids ``num_nodes, num_nodes + 1, ...``; their features are
        zero, as in the official code.
    """
    edge_index = torch.as_tensor(edge_index, dtype=torch.int64)
    task_of_root, roots = task_roots(task, num_nodes, index, edge_index=edge_index, graph_ids=graph_ids)
    n_tasks = int(task_of_root.max()) + 1 if len(task_of_root) else 0
    task_nodes = torch.arange(n_tasks) + num_nodes
    links = torch.stack([task_nodes[task_of_root], roots])
    return torch.cat([edge_index, links], dim=1), task_nodes


def task_roots(task, num_nodes, index=None, *, edge_index=None, graph_ids=None):
    """The roots of every task-tree as a ``(task, root)`` list: what the task node averages.

    Returns
    -------
    task_of_root : torch.Tensor of shape (n_links,)
    roots : torch.Tensor of shape (n_links,)
        Root ``roots[i]`` belongs to task ``task_of_root[i]``; tasks are
        numbered in the order of ``index`` (graph tasks: by graph id).
    """
    if task not in TASKS:
        raise ValueError(f"task={task!r}; expected one of {TASKS}.")
    if task == "node":
        roots = torch.arange(num_nodes) if index is None else torch.as_tensor(index, dtype=torch.int64).reshape(-1)
        _check_nodes(roots, num_nodes, "node-task indices")
        return torch.arange(len(roots)), roots
    if task == "edge":
        pairs = edge_index.t() if index is None else torch.as_tensor(index, dtype=torch.int64)
        if pairs.dim() != 2 or pairs.shape[1] != 2:
            raise ValueError(f"edge-task indices must be node pairs of shape (n, 2), got {tuple(pairs.shape)}.")
        _check_nodes(pairs.reshape(-1), num_nodes, "edge-task pairs")
        return torch.arange(len(pairs)).repeat_interleave(2), pairs.reshape(-1)
    if graph_ids is None:
        graph_ids = torch.zeros(num_nodes, dtype=torch.int64)
    graph_ids = torch.as_tensor(graph_ids, dtype=torch.int64).reshape(-1)
    if len(graph_ids) != num_nodes:
        raise ValueError(f"graph_ids has {len(graph_ids)} entries for {num_nodes} nodes.")
    return graph_ids, torch.arange(num_nodes)
