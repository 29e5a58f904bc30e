"""Task-trees and the neighbour sampler of GIT against direct constructions on small random graphs."""

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.graph._git._task_trees import add_task_nodes, csr_adjacency, sample_neighbors, task_roots


@st.composite
def graphs(draw, max_nodes=14):
    n = draw(st.integers(1, max_nodes))
    pairs = [(u, v) for u in range(n) for v in range(u, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), max_size=3 * n, unique=True)) if pairs else []
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(chosen)
    edge_index = torch.tensor(chosen, dtype=torch.int64).t().reshape(2, -1)
    return graph, edge_index


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_csr_lists_every_neighbour_once(drawn):
    graph, edge_index = drawn
    indptr, neighbors = csr_adjacency(edge_index, graph.number_of_nodes())
    for v in graph:
        assert neighbors[indptr[v]:indptr[v + 1]].tolist() == sorted(graph.neighbors(v))


@settings(max_examples=60, deadline=None)
@given(graphs(), st.data())
def test_full_fanout_is_the_breadth_first_ball_with_every_edge_into_each_frontier(drawn, data):
    graph, edge_index = drawn
    n = graph.number_of_nodes()
    seeds = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    hops = data.draw(st.integers(1, 3))
    sample = sample_neighbors(*csr_adjacency(edge_index, n), torch.tensor(seeds), [-1] * hops)
    # Direct construction: frontier by frontier, every edge into the frontier; new nodes in first-seen order.
    order, frontier, edges = list(seeds), list(seeds), set()
    for _ in range(hops):
        new = []
        for target in frontier:
            for neighbor in sorted(graph.neighbors(target)):
                edges.add((neighbor, target))
                if neighbor not in order and neighbor not in new:
                    new.append(neighbor)
        order += new
        frontier = new
    nodes = sample.nodes.tolist()
    assert nodes[:len(seeds)] == seeds and set(nodes) == set(order) and len(nodes) == len(order)
    assert sorted(nodes[len(seeds):]) == sorted(order[len(seeds):])
    got = {(nodes[s], nodes[t]) for s, t in sample.edge_index.t().tolist()}
    assert got == edges and sample.edge_index.shape[1] == len(edges)
    assert sum(sample.hop_sizes) + len(seeds) == len(nodes)


@settings(max_examples=60, deadline=None)
@given(graphs(), st.integers(1, 3), st.integers(0, 1000))
def test_a_fanout_draws_that_many_distinct_true_neighbours(drawn, fanout, seed):
    graph, edge_index = drawn
    n = graph.number_of_nodes()
    sample = sample_neighbors(*csr_adjacency(edge_index, n), torch.arange(n), [fanout],
                              generator=torch.Generator().manual_seed(seed))
    nodes = sample.nodes.tolist()
    assert nodes == list(range(n))  # every node a seed: nothing new
    incoming = {}
    for s, t in sample.edge_index.t().tolist():
        assert graph.has_edge(nodes[s], nodes[t])
        incoming.setdefault(t, []).append(s)
    for v in graph:
        drawn_here = incoming.get(v, [])
        # a self-loop is one neighbour (networkx's degree counts it twice)
        assert len(drawn_here) == len(set(drawn_here)) == min(len(list(graph.neighbors(v))), fanout)


def test_sampling_is_uniform_and_reproducible():
    star = torch.stack([torch.zeros(6, dtype=torch.int64), torch.arange(1, 7)])
    csr = csr_adjacency(star, 7)
    first = sample_neighbors(*csr, torch.tensor([0]), [2], generator=torch.Generator().manual_seed(3))
    again = sample_neighbors(*csr, torch.tensor([0]), [2], generator=torch.Generator().manual_seed(3))
    assert torch.equal(first.nodes, again.nodes) and torch.equal(first.edge_index, again.edge_index)
    counts = np.zeros(7)
    generator = torch.Generator().manual_seed(0)
    for _ in range(3000):
        counts[sample_neighbors(*csr, torch.tensor([0]), [2], generator=generator).nodes[1:].numpy()] += 1
    assert np.allclose(counts[1:] / 3000, 2 / 6, atol=0.04)


@settings(max_examples=40, deadline=None)
@given(graphs(), st.sampled_from(["node", "edge", "graph"]), st.data())
def test_the_task_node_mean_is_the_mean_of_the_roots(drawn, task, data):
    """Spec property 1: one mean aggregation at the virtual task node equals the mean of the root embeddings."""
    graph, edge_index = drawn
    n = graph.number_of_nodes()
    index = graph_ids = None
    if task == "node":
        index = torch.tensor(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=8)))
    elif task == "edge":
        index = torch.tensor(data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                                                min_size=1, max_size=8)))
    else:
        graph_ids = torch.tensor(sorted(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))))
        graph_ids = torch.unique(graph_ids, return_inverse=True)[1]
    with_tasks, task_nodes = add_task_nodes(edge_index, n, task, index, graph_ids=graph_ids)
    z = torch.randn(n + len(task_nodes), 5, dtype=torch.float64)
    z[n:] = 0.0  # task nodes carry zero features
    links = with_tasks[:, edge_index.shape[1]:]
    total = torch.zeros_like(z).index_add_(0, links[0], z[links[1]])
    at_task_nodes = total[task_nodes] / torch.bincount(links[0], minlength=len(z))[task_nodes, None]
    task_of_root, roots = task_roots(task, n, index, edge_index=edge_index, graph_ids=graph_ids)
    for t in range(len(task_nodes)):
        torch.testing.assert_close(at_task_nodes[t], z[roots[task_of_root == t]].mean(0))
    assert torch.equal(with_tasks[:, :edge_index.shape[1]], edge_index)


@pytest.mark.parametrize("call, match", [
    (lambda: csr_adjacency(torch.tensor([[0], [5]]), 3), r"nodes \[5\] outside the graph's 0..2"),
    (lambda: sample_neighbors(*csr_adjacency(torch.tensor([[0], [1]]), 2), torch.tensor([2]), [1]),
     r"seeds refer to nodes \[2\]"),
    (lambda: sample_neighbors(*csr_adjacency(torch.tensor([[0], [1]]), 2), torch.tensor([1, 1]), [1]), "distinct"),
    (lambda: task_roots("edge", 3, torch.tensor([0, 1])), r"node pairs of shape \(n, 2\)"),
    (lambda: task_roots("node", 3, torch.tensor([-1])), r"nodes \[-1\]"),
    (lambda: task_roots("link", 3), "task='link'"),
])
def test_bad_input_names_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()
