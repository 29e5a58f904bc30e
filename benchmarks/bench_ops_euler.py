"""Speed of ``skicml::euler_serialize`` (GraphGPT's graph -> Eulerian path) against networkx.

Three routes serialize the same graphs:

- ``networkx``: what the official code does (spec section 2.1), per graph:
  build an ``nx.Graph``, shuffle its connected components, and for each one
  with an edge ``nx.eulerize`` it unless already Eulerian (semi-Eulerian
  ones included, as the official code), ``nx.eulerian_circuit`` from a
  random node, and cut the circuit after the last new edge;
- ``reference``: :func:`skicml.ops.euler_serialize_reference`, the op's
  pure-Python ground truth (T-join Eulerization on a BFS tree, linear time);
- ``op (C)``: :func:`skicml.ops.euler_serialize`, the compiled C kernel, one
  call for the whole batch (the batch tensors are built before timing, as a
  tokenizer holds them already; the first call, which may compile the
  kernel, is not timed).

Workloads: 2,000 molecule-sized graphs, and Barabasi-Albert graphs
(``nx.barabasi_albert_graph(n, 3)``, spec section 8) with n = 50 to 400. By
default the molecules are synthetic, with no extra dependency: random trees
of 9 nodes (QM9's heavy-atom count) plus 1-2 ring-closing edges.
``--molecules qm9`` uses the heavy-atom graphs of random QM9 molecules
instead (needs ``pip install rdkit qm9pack``).

Times are process CPU seconds (the build machine is shared, so wall time is
noisy); the op's is the median of ``--repeats`` calls, the other two routes
run once. Printed per workload: graphs per second, mean rows per edge
(``rows/|E|``: the walk's length with duplicates and jumps, over the edge
count) and the op's speed-up over networkx and over the reference. Every
output of every route is checked (each step walks an edge joining the
previous row's node to this one, every edge and node is covered) and the
op's rows must equal the reference's exactly.

Targets: the op at least 20x faster than networkx on molecules and at
least 100x on 400-node graphs.

    python benchmarks/bench_ops_euler.py [--quick] [--molecules {synthetic,qm9}] [--repeats 5]
"""

import argparse
import importlib.util
import random
import time
from itertools import pairwise

import networkx as nx
import numpy as np
import torch
from _common import median_times, wheel_folder

from skicml.ops import euler_serialize, euler_serialize_reference

TARGETS = {"molecules": 20.0, "BA n=400": 100.0}


# --------------------------------------------------------------------------
# Workloads: lists of (n_nodes, [(u, v), ...])


def synthetic_molecules(n_graphs, seed=0):
    """Random 9-node trees plus 1-2 ring-closing edges (no multi-edges)."""
    rng = random.Random(seed)
    graphs = []
    for _ in range(n_graphs):
        n = 9
        edges = [(rng.randrange(i), i) for i in range(1, n)]
        present = {frozenset(e) for e in edges}
        for _ in range(rng.choice((1, 2))):
            while True:
                u, v = rng.sample(range(n), 2)
                if frozenset((u, v)) not in present:
                    break
            present.add(frozenset((u, v)))
            edges.append((u, v))
        graphs.append((n, edges))
    return graphs


def qm9_molecules(n_graphs, seed=0):
    """Heavy-atom graphs of ``n_graphs`` random QM9 molecules (rdkit + qm9pack)."""
    missing = [name for name in ("rdkit", "qm9pack") if importlib.util.find_spec(name) is None]
    if missing:
        raise SystemExit(f"--molecules qm9 needs {' and '.join(missing)}: pip install rdkit qm9pack")
    import pandas as pd
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    # Located, not imported: `import qm9pack` fails with setuptools >= 81.
    folder = wheel_folder("qm9pack", "data")
    parts = [folder / f"qm9_part{i}.csv" for i in (1, 2, 3)]
    smiles = pd.concat([pd.read_csv(part, usecols=["SMILES"]) for part in parts])["SMILES"]
    # A random sample: the table is ordered by size, its first rows are CH4, NH3, ...
    graphs = []
    for text in smiles.sample(frac=1.0, random_state=seed):
        mol = Chem.MolFromSmiles(text)
        if mol is None:
            continue
        edges = [(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()]
        graphs.append((mol.GetNumAtoms(), edges))
        if len(graphs) == n_graphs:
            break
    return graphs


def ba_graphs(n, count, seed=0):
    return [(n, list(nx.barabasi_albert_graph(n, 3, seed=seed + i).edges())) for i in range(count)]


# --------------------------------------------------------------------------
# Routes


def networkx_serialize(n, edges, rng):
    """The official route; a list of (node, (u, v) or None) rows, None opening a component."""
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(edges)
    components = list(nx.connected_components(graph))
    rng.shuffle(components)
    rows = []
    for component in components:
        sub = graph.subgraph(component)
        if sub.number_of_edges() == 0:
            rows.append((next(iter(component)), None))
            continue
        needed = sub.number_of_edges()
        if not nx.is_eulerian(sub):
            sub = nx.eulerize(sub)
        start = rng.choice(sorted(component))
        rows.append((start, None))
        covered = set()
        for u, v in nx.eulerian_circuit(sub, source=start):
            rows.append((v, (u, v)))
            covered.add(frozenset((u, v)))
            if len(covered) == needed:
                break
    return rows


def batch_tensors(graphs, seed=0):
    pairs = [pair for _, edges in graphs for pair in edges]
    edge_index = torch.tensor(pairs, dtype=torch.int64).reshape(-1, 2).T.contiguous()
    edge_ptr = torch.tensor([0] + [len(e) for _, e in graphs]).cumsum(0)
    node_ptr = torch.tensor([0] + [n for n, _ in graphs]).cumsum(0)
    seeds = torch.arange(len(graphs), dtype=torch.int64) + seed
    return edge_index, edge_ptr, node_ptr, seeds


def cpu_time(fn, repeats, warmup=0):
    """(median CPU seconds, last result) of ``fn``."""
    return median_times({"fn": fn}, repeats=repeats, warmup=warmup, device="cpu", clock=time.process_time)["fn"]


# --------------------------------------------------------------------------
# Checks


def check_op_rows(inputs, result):
    """Walk validity and coverage of a whole batch of op rows, vectorised."""
    edge_index, edge_ptr, node_ptr, _ = (t.numpy() for t in inputs)
    nodes, edges, step_ptr = (t.numpy() for t in result)
    graph_of_row = np.repeat(np.arange(len(step_ptr) - 1), np.diff(step_ptr))
    assert (edges[step_ptr[:-1]] == -1).all() and (edges == -1).sum() == len(step_ptr) - 1
    assert (edges >= -2).all()
    steps = np.flatnonzero(edges >= 0)
    assert (edges[steps] < np.diff(edge_ptr)[graph_of_row[steps]]).all()
    column = edge_ptr[graph_of_row[steps]] + edges[steps]
    u, v = edge_index[0, column], edge_index[1, column]
    a, b = nodes[steps - 1], nodes[steps]
    assert (((u == a) & (v == b)) | ((u == b) & (v == a))).all(), "a step leaves the walk"
    assert (np.bincount(column, minlength=edge_index.shape[1]) > 0).all(), "an edge is not covered"
    node_id = node_ptr[graph_of_row] + nodes
    assert (np.bincount(node_id, minlength=node_ptr[-1]) > 0).all(), "a node is not visited"


def check_networkx_rows(graph, rows):
    n, edges = graph
    original = {frozenset(e) for e in edges}
    walked = set()
    for (prev, _), (node, step) in pairwise(rows):
        if step is not None:
            assert step[0] == prev and step[1] == node and frozenset(step) in original
            walked.add(frozenset(step))
    assert walked == original and {node for node, _ in rows} == set(range(n))


# --------------------------------------------------------------------------


def run_workload(name, graphs, repeats):
    n_edges = sum(len(e) for _, e in graphs)
    inputs = batch_tensors(graphs)

    rng = random.Random(0)
    t_nx, nx_rows = cpu_time(lambda: [networkx_serialize(n, e, rng) for n, e in graphs], 1)
    for graph, rows in zip(graphs, nx_rows):
        check_networkx_rows(graph, rows)
    nx_len = sum(len(rows) for rows in nx_rows)

    t_ref, ref = cpu_time(lambda: euler_serialize_reference(*inputs), 1)
    # One warm-up call: the first compiles the C kernel.
    t_op, op = cpu_time(lambda: euler_serialize(*inputs), repeats, warmup=1)
    for got, expected in zip(op, ref):
        assert torch.equal(got, expected), f"{name}: the op differs from the reference"
    check_op_rows(inputs, op)
    op_len = int(op[2][-1])

    count = len(graphs)
    speedups = (t_nx / max(t_op, 1e-9), t_ref / max(t_op, 1e-9))
    for route, seconds, rows in (("networkx", t_nx, nx_len), ("reference", t_ref, op_len),
                                 ("op (C)", t_op, op_len)):
        extra = f"{speedups[0]:9.1f}x {speedups[1]:9.1f}x" if route == "op (C)" else f"{'':>10} {'':>10}"
        print(f"{name:<11} {count:>6} {route:<10} {seconds:10.4f} {count / max(seconds, 1e-9):12.1f} "
              f"{rows / n_edges:8.3f} {extra}")
    return speedups[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run (seconds)")
    parser.add_argument("--molecules", choices=("synthetic", "qm9"), default="synthetic")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls of the op (median)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    n_molecules = 100 if args.quick else 2000
    ba_counts = {50: 2, 100: 1} if args.quick else {50: 40, 100: 20, 200: 8, 400: 4}
    molecules = (qm9_molecules(n_molecules) if args.molecules == "qm9"
                 else synthetic_molecules(n_molecules))
    workloads = [("molecules", molecules)]
    workloads += [(f"BA n={n}", ba_graphs(n, count)) for n, count in ba_counts.items()]

    print(f"torch={torch.__version__} networkx={nx.__version__} molecules={args.molecules} "
          f"(CPU seconds; op: median of {args.repeats})")
    header = (f"{'workload':<11} {'graphs':>6} {'route':<10} {'CPU s':>10} {'graphs/s':>12} "
              f"{'rows/|E|':>8} {'vs nx':>10} {'vs ref':>10}")
    print(header)
    print("-" * len(header))
    results = {name: run_workload(name, graphs, args.repeats) for name, graphs in workloads}
    print("all outputs checked: walk validity, edge and node coverage, op == reference")
    for name, target in TARGETS.items():
        if name in results:
            verdict = "met" if results[name] >= target else "NOT met"
            print(f"target op >= {target:.0f}x networkx on {name}: {results[name]:.1f}x, {verdict}")


if __name__ == "__main__":
    main()
