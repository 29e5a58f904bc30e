"""Contextual stochastic block models in one shared feature space: GIT's multi-domain testbed.

Used by one family: ``graph`` (GIT's pretraining recipe and tour row).

GIT's claim is that one encoder pretrained on task-trees of several graph
domains transfers to a new one. Its real data (text-attributed citation,
e-commerce and knowledge graphs embedded by a sentence encoder) cannot be
had offline, so each *domain* here is a contextual SBM whose node features
live in one shared ``n_features``-d "text" space, as GIT's do:

- every class ``c`` of a domain has a unit vector ``mu_c`` (its "class-text
  embedding"), drawn at random, so domains have different label sets;
- a node of class ``y`` has features ``normalize(mu_y + noise * eps)``;
- a domain shift moves every vector of the domain: a random rotation mixed
  in with weight ``domain_shift`` and a common offset of that length, the
  per-domain offset that GIT's alignment regulariser should remove;
- edges follow a planted partition: each edge leaves a uniform node and
  lands in its class with probability ``homophily``, else in another class.

Node tasks label nodes by class; edge tasks label edges by the unordered
pair of their end nodes' classes (a "relation"); graph tasks are small
graphs of the domain labelled by their majority class. The class
embeddings of each task are returned with it, for zero-shot prototypes.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ..utils.param_validation import Integral, Interval, Real, StrOptions, validate_params

__all__ = ["make_graph_domains"]

_DESCR = "Contextual SBM domains in a shared feature space (skicml.datasets.make_graph_domains)."


def _unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _planted_partition(labels, degree, homophily, rng):
    """Undirected edges, each once as ``(low, high)``, with about ``degree`` neighbours a node.

    Other-class edges go to the classes present (a small graph may lack some).
    """
    n = len(labels)
    _, labels = np.unique(labels, return_inverse=True)
    n_classes = int(labels.max()) + 1
    members = [np.flatnonzero(labels == c) for c in range(n_classes)]
    n_draws = int(round(n * degree / 2))
    source = rng.randint(n, size=n_draws)
    same = rng.rand(n_draws) < homophily
    offset = rng.randint(1, max(n_classes, 2), size=n_draws)
    target_class = np.where(same | (n_classes == 1), labels[source], (labels[source] + offset) % n_classes)
    sizes = np.array([len(m) for m in members])
    picks = (rng.rand(n_draws) * sizes[target_class]).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    target = np.concatenate(members)[starts[target_class] + picks]
    low, high = np.minimum(source, target), np.maximum(source, target)
    keep = low != high
    pairs = np.unique(low[keep] * n + high[keep])
    return np.stack([pairs // n, pairs % n])


def _domain_space(n_classes, n_features, domain_shift, rng):
    """Class vectors, and the map moving a domain's vectors (a rotation mixed in, then an offset)."""
    classes = _unit(rng.randn(n_classes, n_features))
    rotation, _ = np.linalg.qr(rng.randn(n_features, n_features))
    mix = (1.0 - domain_shift) * np.eye(n_features) + domain_shift * rotation
    offset = domain_shift * _unit(rng.randn(n_features))
    return classes, (lambda v: v @ mix.T + offset)


@validate_params(
    {
        "n_domains": [Interval(Integral, 1, None, closed="left")],
        "task": [StrOptions({"node", "edge", "graph"})],
        "n_nodes": [Interval(Integral, 2, None, closed="left")],
        "n_classes": [Interval(Integral, 1, None, closed="left"), "array-like"],
        "n_features": [Interval(Integral, 2, None, closed="left")],
        "degree": [Interval(Real, 0, None, closed="left")],
        "homophily": [Interval(Real, 0, 1, closed="both")],
        "noise": [Interval(Real, 0, None, closed="left")],
        "domain_shift": [Interval(Real, 0, 1, closed="both")],
        "n_graphs": [Interval(Integral, 1, None, closed="left")],
        "graph_size": [tuple],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_graph_domains(n_domains=5, *, task="node", n_nodes=1000, n_classes=5, n_features=64, degree=10.0,
                       homophily=0.8, noise=1.0, domain_shift=0.5, n_graphs=200, graph_size=(10, 30),
                       random_state=None):
    """Graph domains (contextual SBMs) whose node features share one space, for cross-domain transfer.

    Read more in the module docstring of ``skicml/datasets/_graph_domains.py``.

    Parameters
    ----------
    n_domains : int, default=5
    task : {"node", "edge", "graph"}, default="node"
        What the labels are about: nodes (their class), edges (the
        unordered pair of their end nodes' classes) or whole small graphs
        (their majority class).
    n_nodes : int, default=1000
        Nodes of each domain's graph (node and edge tasks).
    n_classes : int or sequence of int, default=5
        Classes of every domain, or one count per domain.
    n_features : int, default=64
    degree : float, default=10.0
        Mean degree (before duplicate edges and self-loops are removed).
    homophily : float, default=0.8
        Probability that an edge stays inside its source's class.
    noise : float, default=1.0
        Scale of the Gaussian noise on each node's class vector (per
        coordinate, times ``1 / sqrt(n_features)``, so 1 is noise as long as
        the class vector).
    domain_shift : float, default=0.5
        0 puts every domain in the same coordinates; 1 rotates each domain's
        vectors at random and moves them by a unit offset.
    n_graphs : int, default=200
        Graphs of each domain (graph tasks).
    graph_size : tuple of int, default=(10, 30)
        The range of their node counts.
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    domains : list of :class:`~sklearn.utils.Bunch`
        One per domain, with ``class_embeddings`` (``(n_labels,
        n_features)``: the domain-shifted class vectors; for edge tasks the
        normalised mean of the pair's two), ``domain`` and ``task``. Node
        and edge tasks: ``x`` (``(n_nodes, n_features)``), ``edge_index``
        (``(2, n_edges)``, each undirected edge once), ``node_labels``, and
        ``target`` with ``pairs`` for edge tasks (the labelled node pairs,
        every edge of the graph). Graph tasks: ``graphs``, a list of dicts
        with ``x`` and ``edge_index`` (what the graph estimators read),
        ``node_labels`` (one array per graph) and ``target``.

    Examples
    --------
    >>> from skicml.datasets import make_graph_domains
    >>> domains = make_graph_domains(3, n_nodes=200, n_features=16, random_state=0)
    >>> first = domains[0]
    >>> first.x.shape, first.class_embeddings.shape, first.edge_index.shape[0]
    ((200, 16), (5, 16), 2)
    """
    rng = check_random_state(random_state)
    counts = np.broadcast_to(np.asarray(n_classes, dtype=np.int64), (n_domains,))
    if np.any(counts < 1):
        raise ValueError(f"n_classes must be at least 1 for every domain, got {counts.tolist()}.")
    low_size, high_size = graph_size
    if not 2 <= low_size <= high_size:
        raise ValueError(f"graph_size={graph_size}: expected (low, high) with 2 <= low <= high.")
    domains = []
    for domain, k in enumerate(counts.tolist()):
        classes, shift = _domain_space(k, n_features, domain_shift, rng)

        def features(labels):
            eps = rng.randn(len(labels), n_features) * noise / np.sqrt(n_features)
            return shift(_unit(classes[labels] + eps))

        bunch = Bunch(domain=domain, task=task, DESCR=_DESCR)
        if task == "graph":
            graphs, node_labels, target = [], [], np.empty(n_graphs, dtype=np.int64)
            for g in range(n_graphs):
                size = rng.randint(low_size, high_size + 1)
                majority = rng.randint(k)
                # Half the nodes (and one more) in the majority class, the rest anywhere.
                labels = np.where(np.arange(size) <= size // 2, majority, rng.randint(k, size=size))
                labels = rng.permutation(labels)
                node_labels.append(labels)
                graphs.append({"x": features(labels),
                               "edge_index": _planted_partition(labels, min(degree, size - 1), homophily, rng)})
                target[g] = majority
            bunch.update(graphs=graphs, node_labels=node_labels, target=target, class_embeddings=_unit(shift(classes)))
        else:
            labels = rng.randint(k, size=n_nodes)
            bunch.update(x=features(labels), node_labels=labels,
                         edge_index=_planted_partition(labels, degree, homophily, rng))
            if task == "node":
                bunch.update(target=labels.copy(), class_embeddings=_unit(shift(classes)))
            else:
                first, second = np.triu_indices(k)
                relation = np.full((k, k), -1, dtype=np.int64)
                relation[first, second] = relation[second, first] = np.arange(len(first))
                pairs = bunch.edge_index.T.copy()
                bunch.update(pairs=pairs, target=relation[labels[pairs[:, 0]], labels[pairs[:, 1]]],
                             class_embeddings=_unit(shift(_unit(classes[first] + classes[second]))))
        domains.append(bunch)
    return domains
