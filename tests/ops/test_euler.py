import threading
import warnings
from collections import Counter
from itertools import pairwise

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from skicml.ops import _dispatch, _euler, euler_serialize, euler_serialize_reference
from skicml.ops.testing import check_custom_op


def _batch(graphs):
    """(edge_index, edge_ptr, node_ptr) for a list of (n_nodes, [(u, v), ...])."""
    pairs = [pair for _, edges in graphs for pair in edges]
    edge_index = torch.tensor(pairs, dtype=torch.int64).reshape(-1, 2).T.contiguous()
    edge_ptr = torch.tensor([0] + [len(edges) for _, edges in graphs]).cumsum(0)
    node_ptr = torch.tensor([0] + [n for n, _ in graphs]).cumsum(0)
    return edge_index, edge_ptr, node_ptr


def _serialize(graphs, seeds, fn=euler_serialize):
    return fn(*_batch(graphs), torch.as_tensor(seeds, dtype=torch.int64))


def _nx_graph(graph):
    return graph.number_of_nodes(), [tuple(e) for e in graph.edges()]


def _components(n, edges):
    g = nx.MultiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    return [set(c) for c in nx.connected_components(g)]


def _check_graph_rows(n, edges, seed, nodes, edges_used):
    """Spec section 6, properties 1-3, on one graph's rows (lists)."""
    components = _components(n, edges)
    rows = len(nodes)
    assert rows >= 1 and edges_used[0] == -1
    # Jumps open the components; the rows between them are exactly one component.
    starts = [i for i, e in enumerate(edges_used) if e < 0]
    assert all(edges_used[i] == -2 for i in starts[1:])
    segments = [set(nodes[a:b]) for a, b in zip(starts, starts[1:] + [rows])]
    assert sorted(map(sorted, segments)) == sorted(map(sorted, components))
    # Every step walks an edge joining the previous node to this one.
    for i in range(1, rows):
        e = edges_used[i]
        if e >= 0:
            assert 0 <= e < len(edges)
            assert sorted(edges[e]) == sorted((nodes[i - 1], nodes[i]))
    # Every edge is covered, and walked no more often than its copies in the
    # Eulerized multigraph (an Eulerian circuit uses each copy once).
    _, _, duplicates = _euler._serialize_graph(n, [u for u, _ in edges], [v for _, v in edges], seed)
    copies = Counter(range(len(edges))) + Counter(edge for _, _, edge in duplicates)
    walked = Counter(e for e in edges_used if e >= 0)
    assert set(walked) == set(range(len(edges)))
    assert all(walked[e] <= copies[e] for e in walked)
    # Shortened: each component's walk ends on the step that covers its last
    # new edge, so its final edge appears nowhere earlier in the component.
    for a, b in zip(starts, starts[1:] + [rows]):
        if b - a > 1:
            assert edges_used[b - 1] not in edges_used[a + 1:b - 1]
    # Length bounds.
    assert len(edges) + len(components) <= rows <= len(edges) + len(duplicates) + len(components)
    assert len(duplicates) <= n - len(components)
    degrees = Counter(u for pair in edges for u in pair)
    if len(components) == 1 and edges and all(d % 2 == 0 for d in degrees.values()):
        assert rows == len(edges) + 1


def _check_batch(graphs, seeds, result):
    nodes, edges_used, step_ptr = (t.tolist() for t in result)
    assert step_ptr[0] == 0 and len(step_ptr) == len(graphs) + 1
    for g, ((n, edges), seed) in enumerate(zip(graphs, seeds)):
        lo, hi = step_ptr[g], step_ptr[g + 1]
        _check_graph_rows(n, edges, seed, nodes[lo:hi], edges_used[lo:hi])


def _assert_same(a, b):
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype == torch.int64
        assert torch.equal(x, y)


def _graph_strategy(max_nodes=30):
    @st.composite
    def graph(draw):
        n = draw(st.integers(1, max_nodes))
        node = st.integers(0, n - 1)
        edges = draw(st.lists(st.tuples(node, node), max_size=2 * n))
        return n, edges

    return graph()


@settings(max_examples=60, deadline=None)
@given(graphs=st.lists(_graph_strategy(), min_size=1, max_size=6),
       seed=st.integers(-(2**63), 2**63 - 1))
def test_kernel_matches_reference_on_random_graphs(graphs, seed):
    seeds = [(seed + 7919 * g) % 2**63 for g in range(len(graphs))]
    result = _serialize(graphs, seeds)
    _assert_same(result, _serialize(graphs, seeds, euler_serialize_reference))
    _check_batch(graphs, seeds, result)


def _random_tree(n, rng):
    return n, [(int(rng.integers(0, i)), i) for i in range(1, n)]


FAMILIES = {
    "tree": [_random_tree(n, np.random.default_rng(n)) for n in range(1, 25)],
    "cycle": [_nx_graph(nx.cycle_graph(n)) for n in range(3, 20)],
    "complete": [_nx_graph(nx.complete_graph(n)) for n in range(1, 9)],
    "star_path_ladder": [_nx_graph(nx.star_graph(5)), _nx_graph(nx.path_graph(6)),
                         _nx_graph(nx.ladder_graph(4)), _nx_graph(nx.petersen_graph())],
    "self_loops_multi": [(1, [(0, 0)]), (1, [(0, 0), (0, 0)]), (2, [(0, 1), (0, 1)]),
                         (3, [(0, 0), (1, 2), (2, 2)]), (4, [(0, 1), (1, 1), (1, 2), (2, 3), (3, 1)])],
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_kernel_matches_reference_on_graph_families(family):
    graphs = FAMILIES[family] * 20
    seeds = list(range(len(graphs)))
    result = _serialize(graphs, seeds)
    _assert_same(result, _serialize(graphs, seeds, euler_serialize_reference))
    _check_batch(graphs, seeds, result)


def test_kernel_matches_reference_on_graph_atlas():
    graphs = [_nx_graph(g) for g in nx.graph_atlas_g()[1:]]  # [0] has no nodes
    assert len(graphs) == 1252
    seeds = [2**40 + 3 * g for g in range(len(graphs))]
    result = _serialize(graphs, seeds)
    _assert_same(result, _serialize(graphs, seeds, euler_serialize_reference))
    _check_batch(graphs, seeds, result)


def test_eulerization_makes_every_degree_even():
    for n, edges in [_nx_graph(g) for g in nx.graph_atlas_g()[1:400]] + FAMILIES["self_loops_multi"]:
        for seed in range(3):
            _, _, duplicates = _euler._serialize_graph(
                n, [u for u, _ in edges], [v for _, v in edges], seed
            )
            degree = Counter(u for pair in edges for u in pair)
            for child, parent, edge in duplicates:
                assert sorted(edges[edge]) == sorted((child, parent))
                degree[child] += 1
                degree[parent] += 1
            assert all(d % 2 == 0 for d in degree.values())


def test_rows_equal_edges_plus_one_on_eulerian_graphs():
    # Connected, all degrees even: no duplicate, the whole circuit is kept.
    graphs = [_nx_graph(nx.cycle_graph(7)), _nx_graph(nx.complete_graph(5)), (1, [(0, 0)]),
              (3, [(0, 1), (1, 2), (2, 0), (0, 0)])]
    for seed in range(10):
        _, _, step_ptr = _serialize(graphs, [seed] * len(graphs))
        assert torch.diff(step_ptr).tolist() == [len(edges) + 1 for _, edges in graphs]


def test_single_node_and_isolated_nodes():
    nodes, edges, step_ptr = _serialize([(1, []), (5, [])], [0, 1])
    assert step_ptr.tolist() == [0, 1, 6]
    assert nodes[0].item() == 0 and edges[0].item() == -1
    assert sorted(nodes[1:].tolist()) == [0, 1, 2, 3, 4]
    assert edges[1:].tolist() == [-1, -2, -2, -2, -2]


def test_start_node_is_uniform():
    # A path is not vertex-transitive: a start tied to the BFS root, to node
    # 0 or to an end of the longest path would fail this.
    n, seeds = 6, list(range(6000))
    nodes, _, step_ptr = _serialize([_nx_graph(nx.path_graph(n))] * len(seeds), seeds)
    counts = np.bincount(nodes[step_ptr[:-1]].numpy(), minlength=n)
    assert chisquare(counts).pvalue > 1e-3, counts


def test_component_order_is_uniform():
    # Three isolated nodes: the first row is each of them a third of the time.
    seeds = list(range(3000))
    nodes, _, step_ptr = _serialize([(3, [])] * len(seeds), seeds)
    counts = np.bincount(nodes[step_ptr[:-1]].numpy(), minlength=3)
    assert chisquare(counts).pvalue > 1e-3, counts


@pytest.mark.parametrize("graph", [(2, [(0, 1)]), _nx_graph(nx.cycle_graph(3)),
                                   _nx_graph(nx.star_graph(3)), _nx_graph(nx.complete_graph(4))])
def test_walks_vary_with_the_seed(graph):
    seeds = list(range(40))
    nodes, _, step_ptr = _serialize([graph] * len(seeds), seeds)
    walks = {tuple(nodes[a:b].tolist()) for a, b in pairwise(step_ptr)}
    assert len(walks) > 1


def test_graphs_are_independent_of_their_batch():
    graphs = [FAMILIES["tree"][10], _nx_graph(nx.petersen_graph()), (4, [(0, 1)])]
    seeds = [11, -5, 2**62]
    nodes, edges, step_ptr = _serialize(graphs, seeds)
    for g, (graph, seed) in enumerate(zip(graphs, seeds)):
        alone_nodes, alone_edges, _ = _serialize([graph], [seed])
        assert torch.equal(nodes[step_ptr[g]:step_ptr[g + 1]], alone_nodes)
        assert torch.equal(edges[step_ptr[g]:step_ptr[g + 1]], alone_edges)
    _assert_same(_serialize(graphs, seeds), (nodes, edges, step_ptr))


def test_splitmix64_matches_published_values():
    # First outputs for seed 1234567 as published on Rosetta Code
    # ("Pseudo-random numbers/Splitmix64"), from Vigna's splitmix64.c.
    rng = _euler._SplitMix64(1234567)
    assert [rng.next() for _ in range(3)] == [
        6457827717110365317, 3203168211198807973, 9817491932198370423
    ]


def test_empty_batch():
    empty = torch.zeros(0, dtype=torch.int64)
    result = euler_serialize(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(1, dtype=torch.int64),
                             torch.zeros(1, dtype=torch.int64), empty)
    assert [t.tolist() for t in result] == [[], [], [0]]


def test_opcheck():
    samples = [
        (*_batch([(4, [(0, 1), (1, 2), (2, 3)]), (3, []), (2, [(0, 0), (0, 1)])]),
         torch.tensor([1, 2, 3])),
        (*_batch([(1, [])]), torch.tensor([0])),
    ]
    check_custom_op(euler_serialize, samples, reference=euler_serialize_reference)


def _good():
    return (*_batch([(3, [(0, 1), (1, 2)]), (2, [(0, 1)])]), torch.tensor([0, 1]))


@pytest.mark.parametrize("fn", [euler_serialize, euler_serialize_reference])
@pytest.mark.parametrize("position, bad, message", [
    (0, torch.zeros(3, 3, dtype=torch.int64), r"edge_index must have shape \(2, E_total\)"),
    (0, torch.zeros(2, 3, dtype=torch.int32), "edge_index must be an int64 tensor"),
    (0, torch.tensor([[0, 1, 0], [1, 3, 1]]), r"column 1 \(edge 1 of graph 0\) is \(1, 3\)"),
    (0, torch.tensor([[0, 1, 0], [1, 2, 2]]), r"edge 0 of graph 1\) is \(0, 2\).*\[0, 2\)"),
    (0, torch.tensor([[0, -1, 0], [1, 2, 1]]), "node ids must be local"),
    (1, torch.tensor([0, 2]), r"edge_ptr must have shape \(G\+1,\)"),
    (1, torch.tensor([0, 2, 2]), "edge_ptr must be non-decreasing offsets from 0 to E_total=3"),
    (2, torch.tensor([0, 3, 3]), "graph 1 has 0 nodes"),
    (2, torch.tensor([1, 3, 5]), "node_ptr must be increasing offsets from 0"),
    (3, torch.tensor([[0, 1]]), r"seeds must have shape \(G,\)"),
    (3, torch.tensor([0.0, 1.0]), "seeds must be an int64 tensor"),
])
def test_bad_inputs(fn, position, bad, message):
    args = list(_good())
    args[position] = bad
    with pytest.raises(ValueError, match=message):
        fn(*args)


@pytest.fixture
def fresh_kernel(tmp_path, monkeypatch):
    """A kernel built from scratch in an empty cache; the normal one afterwards."""
    monkeypatch.setenv("SKICML_CACHE_DIR", str(tmp_path))
    _euler._reset_kernel()
    yield tmp_path
    _euler._reset_kernel()


def test_kernel_is_compiled_into_the_cache(fresh_kernel, monkeypatch):
    expected = _serialize(FAMILIES["tree"], range(len(FAMILIES["tree"])), euler_serialize_reference)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _assert_same(_serialize(FAMILIES["tree"], range(len(FAMILIES["tree"]))), expected)
    (library,) = fresh_kernel.iterdir()
    assert library.name.startswith("euler_kernel-") and library.suffix == ".so"
    # An edited source gets its own library, not the stale one.
    edited = fresh_kernel / "edited.c"
    edited.write_text(_euler._KERNEL_SOURCE.read_text() + "\n/* edited */\n")
    monkeypatch.setattr(_euler, "_KERNEL_SOURCE", edited)
    _euler._reset_kernel()
    _assert_same(_serialize(FAMILIES["tree"], range(len(FAMILIES["tree"]))), expected)
    assert len(list(fresh_kernel.glob("*.so"))) == 2


def test_concurrent_compiles_leave_one_complete_library(tmp_path):
    target = tmp_path / "kernel.so"
    errors = []

    def build():
        try:
            _dispatch.compile_c_library(_euler._KERNEL_SOURCE, target, _euler._CFLAGS)
        except (OSError, RuntimeError) as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [p.name for p in tmp_path.iterdir()] == ["kernel.so"]


def test_falls_back_to_reference_without_compiler(fresh_kernel, monkeypatch):
    graphs = FAMILIES["complete"] + FAMILIES["self_loops_multi"]
    seeds = list(range(len(graphs)))
    expected = _serialize(graphs, seeds, euler_serialize_reference)
    monkeypatch.setattr(_dispatch, "find_c_compiler", lambda: None)
    with pytest.warns(RuntimeWarning, match="no C compiler was found.*Install a C compiler"):
        result = _serialize(graphs, seeds)
    _assert_same(result, expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once, not on every call
        _assert_same(_serialize(graphs, seeds), expected)
    assert list(fresh_kernel.glob("*.so")) == []


def test_falls_back_to_reference_when_compilation_fails(fresh_kernel, monkeypatch):
    broken = fresh_kernel / "broken.c"
    broken.write_text("this is not C\n")
    monkeypatch.setattr(_euler, "_KERNEL_SOURCE", broken)
    graphs = FAMILIES["cycle"]
    with pytest.warns(RuntimeWarning, match="failed on .*broken.c"):
        result = _serialize(graphs, range(len(graphs)))
    _assert_same(result, _serialize(graphs, range(len(graphs)), euler_serialize_reference))
    assert list(fresh_kernel.glob("*.so*")) == []  # no half-written library left behind


def test_disable_custom_kernels_runs_reference(monkeypatch):
    def no_kernel():
        raise AssertionError("the kernel must not be loaded")

    monkeypatch.setenv("SKICML_DISABLE_CUSTOM_KERNELS", "1")
    monkeypatch.setattr(_euler, "_load_kernel", no_kernel)
    graphs = FAMILIES["complete"]
    _assert_same(_serialize(graphs, range(len(graphs))),
                 _serialize(graphs, range(len(graphs)), euler_serialize_reference))
