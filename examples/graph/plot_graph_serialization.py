"""
==============================================
A molecule as a token sequence, and back again
==============================================

GraphGPT (Zhao et al., ICML 2025) reads a graph the way a language model
reads text: :class:`~skicml.graph.EulerTokenizer` walks the graph along an
Eulerian path, which crosses every edge (a few of them twice, so that such a
walk exists), and writes one row of tokens per step. The row holds the
node's index in order of first appearance, its attributes and the
attributes of the edge just crossed. The map is lossless: the graph can be
rebuilt from its tokens. Every random walk is a different sentence for the
same graph, which is the augmentation GraphGPT trains with.

This example serializes caffeine, draws the walk, rebuilds the molecule
from its tokens and times the walk-finding op against the networkx route
of the official code. Molecules are read from SMILES with RDKit (``pip
install skicml[chem]``).
"""

# %%
# Caffeine as a graph
# -------------------
# The GraphGPT estimators accept SMILES strings directly;
# :func:`~skicml.graph.as_graph_list` shows what they make of them: heavy
# atoms as nodes with 9 integer features (atomic number, chirality, degree,
# formal charge, hydrogens, radical electrons, hybridization, aromaticity,
# ring membership) and bonds as edges with 3 (bond type, stereo,
# conjugation), in the layout of ``torch_geometric.utils.from_smiles``.
# Here the molecule becomes a networkx graph with those features under
# names of our own, ``atom`` and ``bond`` (networkx graphs are one of the
# other inputs the tokenizer accepts).
import time
from itertools import pairwise

import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
import pandas as pd
import torch

from skicml.datasets import make_triangle_graphs
from skicml.graph import EulerTokenizer, as_graph_list
from skicml.ops import euler_serialize


def to_networkx(smiles):
    parsed = as_graph_list([smiles])[0]
    graph = nx.Graph()
    for atom, features in enumerate(parsed.x.astype(np.int64)):
        graph.add_node(atom, atom=features)
    for (u, v), features in zip(parsed.edge_index.T, parsed.edge_attr.astype(np.int64)):
        graph.add_edge(int(u), int(v), bond=features)
    return graph


molecule = to_networkx("CN1C=NC2=C1C(=O)N(C(=O)N2C)C")  # caffeine
ELEMENTS = {6: "C", 7: "N", 8: "O"}
symbols = {atom: ELEMENTS[int(data["atom"][0])] for atom, data in molecule.nodes(data=True)}
print(f"{molecule.number_of_nodes()} heavy atoms, {molecule.number_of_edges()} bonds")

# %%
# The token table
# ---------------
# ``fit`` learns the vocabulary from the data: one token per value seen in
# each attribute column, plus a default token per column (which values
# unseen in ``fit`` also map to). ``transform`` gives one int64 array of
# shape ``(rows, F)`` per graph; here ``F = 14``: the node index, 9 atom
# columns, 3 bond columns and the step kind (``<start>``, ``<edge>`` or
# ``<jump>``, which marks a jump between connected components), followed by
# an ``<eos>`` row that the fine-tuning head reads. ``node_attr`` and
# ``edge_attr`` name the attributes to read.
tokenizer = EulerTokenizer(node_attr="atom", edge_attr="bond", random_state=0).fit([molecule])
tokens = tokenizer.transform([molecule])[0]
print(f"vocabulary: {tokenizer.vocab_size_} tokens; sequence shape: {tokens.shape}")

atom_columns = ["atomic_num", "chirality", "degree", "charge", "num_hs", "radicals", "hybrid.",
                "aromatic", "in_ring"]
bond_columns = ["bond_type", "stereo", "conjugated"]
names = np.array(tokenizer.id_to_token_)[tokens]
table = pd.DataFrame(names, columns=["index", *atom_columns, *bond_columns, "kind"])
with pd.option_context("display.width", 250, "display.max_columns", None):
    print(table)

# %%
# The index column does not start at 0: with the default
# ``reindex="cyclic"`` the first-appearance order is shifted by a random
# offset modulo ``node_scope`` (64 here), so that training sees every index
# token and not only the small ones. A column default such as ``edge0:?`` on
# the first row means "no edge was crossed to get here".
#
# Drawing the walk
# ----------------
# :meth:`~skicml.graph.EulerTokenizer.inverse_transform` rebuilds a graph
# whose node ``k`` is the ``k``-th new node of the walk, with the attributes
# under the names the tokenizer read and in their dtype (integers here; a
# category label would come back as the label). Matching it to the
# molecule (with :func:`networkx.is_isomorphic`'s matcher, comparing atom and
# bond features) both checks that nothing was lost and tells which atom each
# row visited.
matcher = nx.algorithms.isomorphism.GraphMatcher


def same(key):
    return lambda a, b: np.array_equal(a[key], b[key])


def walk_of(sequence):
    """Atoms of ``molecule`` visited by each row of ``sequence``."""
    rebuilt = tokenizer.inverse_transform([sequence])[0]
    match = matcher(rebuilt, molecule, node_match=same("atom"), edge_match=same("bond"))
    assert match.is_isomorphic(), "the rebuilt graph differs from the molecule"
    atom_of = match.mapping  # rebuilt node -> atom of the molecule
    index_column = sequence[sequence[:, -1] != tokenizer.vocab_["<eos>"], 0]
    first_seen = {}
    for token in index_column:
        first_seen.setdefault(token, len(first_seen))
    return [atom_of[first_seen[token]] for token in index_column]


positions = nx.kamada_kawai_layout(molecule)


def draw_walk(ax, walk, title):
    steps = {}
    for step, (u, v) in enumerate(pairwise(walk), start=1):
        steps.setdefault(frozenset((u, v)), []).append(str(step))
    nx.draw_networkx_edges(molecule, positions, ax=ax, edge_color="0.6", width=2)
    nx.draw_networkx_nodes(molecule, positions, ax=ax, node_color="white", edgecolors="0.3", node_size=380)
    nx.draw_networkx_labels(molecule, positions, labels=symbols, ax=ax, font_size=9)
    nx.draw_networkx_edge_labels(
        molecule, positions, ax=ax, font_size=7, font_color="tab:red",
        edge_labels={tuple(edge): ",".join(s) for edge, s in steps.items()},
    )
    ax.scatter(*positions[walk[0]], s=900, facecolors="none", edgecolors="tab:green", linewidths=2)
    ax.set_title(title, fontsize=10)
    ax.set_axis_off()


rebuilt = tokenizer.inverse_transform([tokens])[0]
print("rebuilt graph isomorphic to caffeine, features included:",
      nx.is_isomorphic(rebuilt, molecule, node_match=same("atom"), edge_match=same("bond")))
print("attributes of the rebuilt node 0:", {key: value.dtype for key, value in rebuilt.nodes[0].items()})
walk = walk_of(tokens)
fig, ax = plt.subplots(figsize=(5, 4.5))
draw_walk(ax, walk, f"{len(walk) - 1} steps over {molecule.number_of_edges()} bonds (start circled)")
fig.tight_layout()
plt.show()

# %%
# The red numbers are the steps that cross each bond. A walk that crosses
# every edge exactly once exists only when at most two nodes have an odd
# degree; caffeine has twelve (its methyl carbons and oxygens are dead ends,
# and most ring atoms have three neighbours), so the walk must cross some
# bonds twice, out and back. Choosing which ones is the Eulerization: skicml
# duplicates the edges of a T-join on a BFS spanning tree, in linear time,
# where the official code uses networkx's minimum-weight matching; on
# molecules the walks come out about as long. The walk stops after its last
# new bond instead of returning to its start.
print("atoms of odd degree:", sum(degree % 2 for _, degree in molecule.degree()))

# %%
# Different seeds, different walks
# --------------------------------
# Each seed gives a different start, a different walk and a different index
# offset; every one of them decodes to caffeine.
fig, axes = plt.subplots(1, 3, figsize=(12, 4))
for ax, seed in zip(axes, [1, 2, 3]):
    sequence = EulerTokenizer(node_attr="atom", edge_attr="bond", random_state=seed).fit_transform([molecule])[0]
    draw_walk(ax, walk_of(sequence), f"random_state={seed}: {len(sequence) - 1} rows + <eos>")
    first_indices = [tokenizer.id_to_token_[t] for t in sequence[:4, 0]]
    print(f"seed {seed}: first index tokens {first_indices}")
fig.tight_layout()
plt.show()

# %%
# The same graph always gives the same tokens for one ``random_state``,
# wherever it sits in ``X`` (the walk's seed is derived from the graph's
# content), so ``fit_transform`` equals ``fit().transform()`` as
# scikit-learn expects. Training draws other walks as augmentation views.
theobromine = to_networkx("CN1C=NC2=C1C(=O)NC(=O)N2C")
again = tokenizer.transform([theobromine, molecule])[1]
print("same tokens when the molecule is second in X:", np.array_equal(again, tokens))

# %%
# Speed of the walk
# -----------------
# Walks are drawn every time a batch is built, so their cost matters. The
# ``skicml::euler_serialize`` custom op finds the walks of a whole batch in
# one call of a compiled C kernel. The official code's route is networkx,
# per graph: ``nx.eulerize`` on each connected component (a minimum-weight
# matching of its odd-degree nodes, duplicating the edges of shortest paths
# between matched pairs), then ``nx.eulerian_circuit``, cut after the last
# new edge. Both on 200 random graphs of 5 to 25 nodes:
graphs, _ = make_triangle_graphs(200, random_state=0)


def networkx_walk(graph, rng):
    walk = []
    components = [graph.subgraph(c) for c in nx.connected_components(graph)]
    rng.shuffle(components)
    for component in components:
        start = rng.choice(list(component))
        walk.append(start)
        if component.number_of_edges() == 0:
            continue
        eulerian = component if nx.is_eulerian(component) else nx.eulerize(component)
        covered = set()
        for u, v in nx.eulerian_circuit(eulerian, source=start):
            walk.append(v)
            covered.add(frozenset((u, v)))
            if len(covered) == component.number_of_edges():
                break
    return walk


rng = np.random.default_rng(0)
start = time.perf_counter()
nx_walks = [networkx_walk(graph, rng) for graph in graphs]
nx_seconds = time.perf_counter() - start

batch = as_graph_list(graphs)
edge_index = np.concatenate([g.edge_index for g in batch], axis=1)
edge_ptr = np.cumsum([0] + [g.n_edges for g in batch])
node_ptr = np.cumsum([0] + [g.num_nodes for g in batch])
inputs = [torch.as_tensor(a) for a in (edge_index, edge_ptr, node_ptr, np.arange(len(batch)))]
euler_serialize(*inputs)  # the first call may compile the kernel
start = time.perf_counter()
nodes, edges, step_ptr = euler_serialize(*inputs)
op_seconds = time.perf_counter() - start

n_edges = sum(g.number_of_edges() for g in graphs)
print(f"networkx:        {nx_seconds * 1e3:8.1f} ms, {sum(map(len, nx_walks)) / n_edges:.3f} rows per edge")
print(f"euler_serialize: {op_seconds * 1e3:8.1f} ms, {len(nodes) / n_edges:.3f} rows per edge")
print(f"speed-up: {nx_seconds / op_seconds:.0f}x")

# %%
# Rows per edge counts the walk's length with duplicated edges and jumps
# between components: the T-join duplicates different edges than the
# matching, but on small sparse graphs the walks come out about as long.
# Minimum-weight matching is cubic in the number of odd-degree nodes, so the
# gap in speed grows with the graph; :ref:`perf-euler` has the numbers on
# larger graphs.
