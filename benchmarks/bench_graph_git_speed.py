"""GIT task-trees on a 100k-node graph: batch construction against a plain-Python sampler, and one training epoch.

Run::

    python benchmarks/bench_graph_git_speed.py

The graph is one contextual-SBM domain (:func:`~skicml.datasets.make_graph_domains`,
100,000 nodes, about 500,000 undirected edges, 64 features). Timed, median
of interleaved rounds (``benchmarks/_common.py``):

- reading the graph into a :class:`TaskGraph` (CSR adjacency of both
  directions, one node task per node);
- the sampled two-hop computation trees (fan-out 10 a hop, without
  replacement) of a batch of 1,024 node tasks: ``TaskGraph.batch`` (tensor
  ops over the CSR arrays) against PyG's ``NeighborLoader`` where it runs
  (it needs pyg-lib or torch-sparse, compiled extensions that do not
  install here) and a plain-Python sampler over adjacency lists, the
  construction the official code's per-node loops amount to. Both samplers
  draw the same trees in distribution, checked by the mean tree size;
- one pretraining epoch (every node task once, batches of 256, GIT's
  objective, Adam) and the embedding of every node from its full two-hop
  neighbourhood (``mode="in_context"``'s prediction path), single thread.
"""

from __future__ import annotations

import argparse
import random
import time
import warnings

import numpy as np
import torch

from _common import median_times

from skicml.datasets import make_graph_domains
from skicml.graph import GITModel, GITPretrainObjective, TaskSet
from skicml.graph._git._backbone import TaskTreeNet
from skicml.graph._git._data import build_task_graph, read_task_sets

N_NODES, N_FEATURES, FANOUTS, BATCH = 100_000, 64, (10, 10), 1024


def python_trees(adjacency, seeds, fanouts, rng):
    """The sampled computation trees of ``seeds``, node by node in Python: local ids, features rows, edges."""
    local = {}
    nodes = []
    for seed in seeds:
        local[seed] = len(nodes)
        nodes.append(seed)
    frontier, sources, targets = list(seeds), [], []
    for fanout in fanouts:
        reached = []
        for node in frontier:
            neighbours = adjacency[node]
            chosen = neighbours if len(neighbours) <= fanout else rng.sample(neighbours, fanout)
            for neighbour in chosen:
                if neighbour not in local:
                    local[neighbour] = len(nodes)
                    nodes.append(neighbour)
                    reached.append(neighbour)
                sources.append(local[neighbour])
                targets.append(local[node])
        frontier = reached
    return nodes, (sources, targets)


def neighbor_loader(x, edge_index):
    """PyG's ``NeighborLoader`` over the graph, or the reason it cannot run here."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.jit and pyg-lib deprecation notices
            from torch_geometric.data import Data
            from torch_geometric.loader import NeighborLoader
            from torch_geometric.utils import to_undirected

            loader = NeighborLoader(Data(x=x, edge_index=to_undirected(edge_index)), num_neighbors=list(FANOUTS),
                                    batch_size=BATCH, shuffle=True)
            next(iter(loader))
        return loader, None
    except Exception as error:  # ImportError without pyg-lib / torch-sparse
        return None, f"{type(error).__name__}: {error}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    domain = make_graph_domains(1, n_nodes=N_NODES, n_features=N_FEATURES, degree=10.0, random_state=0)[0]
    task_set = TaskSet({"x": domain.x, "edge_index": domain.edge_index})
    read = read_task_sets([task_set])

    started = time.perf_counter()
    task_graph = build_task_graph(read, None)
    read_seconds = time.perf_counter() - started
    indptr, neighbors = task_graph.indptr.numpy(), task_graph.neighbors.numpy()
    adjacency = [neighbors[indptr[i]:indptr[i + 1]].tolist() for i in range(N_NODES)]
    print(f"graph: {N_NODES} nodes, {len(neighbors)} directed edges; read into a TaskGraph in {read_seconds:.2f} s")

    generator, rng, py_rng = torch.Generator().manual_seed(0), np.random.default_rng(0), random.Random(0)
    sizes = {"tensor": [], "python": []}

    def tensor_batch():
        x, edge_index, _, _ = task_graph.batch(torch.as_tensor(rng.choice(N_NODES, BATCH, replace=False)),
                                               list(FANOUTS), generator=generator)
        sizes["tensor"].append(len(x))

    def python_batch():
        nodes, edges = python_trees(adjacency, rng.choice(N_NODES, BATCH, replace=False).tolist(), FANOUTS, py_rng)
        x, _ = torch.as_tensor(domain.x[nodes]), torch.tensor(edges)  # the same outputs as TaskGraph.batch
        sizes["python"].append(len(x))

    contenders = {"TaskGraph.batch": tensor_batch, "plain Python": python_batch}
    loader, reason = neighbor_loader(torch.as_tensor(domain.x), torch.as_tensor(domain.edge_index))
    if loader is not None:
        batches = iter(loader)
        contenders["PyG NeighborLoader"] = lambda: next(batches)
    times = median_times(contenders, repeats=args.repeats, warmup=1)
    print(f"\nTwo-hop trees (fan-out {FANOUTS}) of {BATCH} node tasks, median of {args.repeats}:")
    print(f"{'sampler':22}{'ms / batch':>12}{'tasks / s':>12}{'vs tensor':>11}")
    base = times["TaskGraph.batch"][0]
    for name, (seconds, _) in times.items():
        print(f"{name:22}{1e3 * seconds:>12.1f}{BATCH / seconds:>12.0f}{seconds / base:>10.1f}x")
    if reason:
        print(f"{'PyG NeighborLoader':22}  not run: {reason}")
    print(f"mean nodes a batch: tensor {np.mean(sizes['tensor']):.0f}, python {np.mean(sizes['python']):.0f}")

    torch.manual_seed(0)
    model = GITModel(N_FEATURES, 64, 2, "batch", 0.15)
    objective = GITPretrainObjective(model, 0.0, 1.0, 0.2, 0.2)
    net = TaskTreeNet(model, task_graph, FANOUTS[0], objective=objective).train()
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-4)
    order = torch.randperm(N_NODES)
    started = time.perf_counter()
    for start in range(0, N_NODES, 256):
        optimizer.zero_grad()
        net(order[start:start + 256]).backward()
        optimizer.step()
    epoch_seconds = time.perf_counter() - started

    embedder = TaskTreeNet(model, task_graph, -1).eval()
    started = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, N_NODES, 1024):
            embedder(torch.arange(start, min(start + 1024, N_NODES)))
    embed_seconds = time.perf_counter() - started
    print(f"\nOne pretraining epoch ({N_NODES} tasks, batches of 256, {args.threads} thread): {epoch_seconds:.1f} s "
          f"({N_NODES / epoch_seconds:.0f} tasks/s)")
    print(f"Embedding every node from its full two-hop tree: {embed_seconds:.1f} s "
          f"({N_NODES / embed_seconds:.0f} tasks/s)")


if __name__ == "__main__":
    main()
