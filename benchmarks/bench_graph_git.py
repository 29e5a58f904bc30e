"""GIT on held-out graph domains: fine-tuned, in context (1 / 5 / 10 shots), zero-shot, against baselines.

Run::

    python benchmarks/bench_graph_git.py --seeds 3

Every seed draws, for each task kind (node, edge, graph), one held-out
contextual-SBM domain (:func:`~skicml.datasets.make_graph_domains`, seeds
below 100, which the shipped backbone's pretraining never drew) as two
graphs: the benchmark's, and a sibling with the same classes, class
embeddings and domain shift (GIT's "another dataset of the same domain").
Contenders:

- GIT from the shipped backbone (``pretrained``) and from random weights
  (``scratch``), fine-tuned on a 20% labelled split, in context from k
  labelled examples a class, and zero-shot from the class embeddings, as
  they are (``zero-shot``) and after specialization on the sibling
  (``zero-shot+SFT``: ``specialize=True`` on 1,000 of its labelled examples);
- GCN and GraphSAGE (torch_geometric) trained from scratch on the same
  labels (full batch, Adam, 200 epochs; edges read by an MLP on the end
  nodes' embeddings, graphs by mean pooling);
- a features-only logistic regression (a node's features, an edge's two
  end nodes' sum and product, a graph's mean), and for zero-shot the raw
  features' nearest class embedding.

Accuracy on the unlabelled rest, mean and spread over seeds; the ratio
column is GIT-pretrained over the best baseline of the same row.

``--protocol in-context`` is the few-shot test with the baselines a user
would try first, on the same SBM domains (``--domains sbm``, the shipped
backbone) or on domains that share meaning (``--domains semantic``:
:func:`~skicml.datasets.make_semantic_graph_domains`, MiniLM texts; the
backbone is pretrained here on other domains of the same concept bank, or
read from ``--backbone``)::

    python benchmarks/bench_graph_git.py --protocol in-context --domains semantic --seeds 3

For every seed and task kind (node, edge, graph) one held-out domain, and
``--support-sets`` random support sets of ``--shots`` labelled examples a
class; every contender is scored on the rest:

- GIT in context from the pretrained backbone, and from ``--scratch-inits``
  random initialisations (each scored on every support set);
- training-free nearest-centroid prototypes on the raw features and on
  propagated features ``A_hat^2 X`` (SGC's; an edge reads the mean of its
  end nodes, a graph the mean of its nodes, as GIT's task-trees do);
- a logistic regression on the raw features and a GCN (200 epochs) trained
  on the few labels.

GIT and the centroids are scored by one rule, GIT's own (the official
``proto_classify``): a class's prototype is the mean unit vector of its
support rows, and a query goes to the prototype of highest cosine; on GIT's
embeddings that is ``GITClassifier(mode="in_context").score``.

It prints mean accuracy, the seed values, the sign of pretrained minus
scratch per seed, and GIT pretrained over the best baseline. Long runs in
parts: ``--seed-list 1,2`` runs those seeds only, ``--tasks`` those task
kinds, and ``--results FILE`` appends every finished (seed, task) to a
JSON-lines file at once, skips the ones already there with the same
settings, and tabulates every seed the file holds (``--summarize``: the
table only)::

    python benchmarks/bench_graph_git.py --protocol in-context --domains semantic \
        --seed-list 2 --backbone run/git_semantic.pt --results run/git_semantic.jsonl

Pretraining sweeps (semantic): ``--widths 64,128,384`` pretrains one
backbone a width (``<backbone>_w<width>.pt``) and scores it beside random
weights of that width; ``--pretrain-patience P`` pretrains epoch by epoch
and keeps the epoch of best probe accuracy (5-shot in context on one held-out
domain of each task kind, seeds 2000+), stopping after ``P`` epochs without
gain.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F

from sklearn.utils import Bunch

from skicml.datasets import make_graph_domains
from skicml.graph import GITClassifier

N_FEATURES = 64
DOMAIN = dict(n_nodes=1000, n_features=N_FEATURES, noise=2.0, homophily=0.7, degree=8.0, n_graphs=400,
              graph_size=(10, 30))
N_CLASSES = {"node": 5, "edge": 3, "graph": 4}
SHOTS = (1, 5, 10)


# ---------------------------------------------------------------- data
def domain_pair(task, seed):
    """Two graphs of one held-out domain (the same classes, class embeddings and shift): the benchmark's
    domain and the sibling that specialization reads before zero-shot on the first."""
    size = dict(DOMAIN, n_nodes=2 * DOMAIN["n_nodes"], n_graphs=2 * DOMAIN["n_graphs"])
    if task != "graph":  # a half keeps the edges inside it, about half of a node's: twice the degree keeps it
        size["degree"] = 2 * DOMAIN["degree"]
    whole = make_graph_domains(1, task=task, n_classes=N_CLASSES[task], random_state=seed, **size)[0]
    if task == "graph":
        half = DOMAIN["n_graphs"]
        return tuple(Bunch(task=task, graphs=whole.graphs[part], target=whole.target[part],
                           class_embeddings=whole.class_embeddings)
                     for part in (slice(0, half), slice(half, None)))
    # Nodes are drawn independently of their ids, so the first and second halves are two graphs of the domain.
    halves = []
    for part in (np.arange(DOMAIN["n_nodes"]), np.arange(DOMAIN["n_nodes"], 2 * DOMAIN["n_nodes"])):
        inside = np.isin(whole.edge_index, part).all(0)
        edge_index = whole.edge_index[:, inside] - part[0]
        half = Bunch(task=task, x=whole.x[part], edge_index=edge_index, class_embeddings=whole.class_embeddings)
        if task == "node":
            half.target = whole.target[part]
        else:
            half.pairs, half.target = edge_index.T.copy(), whole.target[inside]
        halves.append(half)
    return tuple(halves)


def examples(domain):
    """``(X for GITClassifier, graph=, labels)`` of a domain."""
    if domain.task == "graph":
        return domain.graphs, None, domain.target
    graph = {"x": domain.x, "edge_index": domain.edge_index}
    X = np.arange(len(domain.x)) if domain.task == "node" else domain.pairs
    return X, graph, domain.target


def take(X, rows):
    return [X[i] for i in rows] if isinstance(X, list) else X[rows]


def split(labels, fraction, rng):
    train = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:max(1, int(fraction * np.sum(labels == c)))]
                            for c in np.unique(labels)])
    return train, np.setdiff1d(np.arange(len(labels)), train)


def shots_split(labels, k, rng):
    train = np.concatenate([rng.choice(np.flatnonzero(labels == c), k, replace=False) for c in np.unique(labels)])
    return train, np.setdiff1d(np.arange(len(labels)), train)


# ------------------------------------------------------------- baselines
def plain_features(domain, X):
    if domain.task == "graph":
        return np.stack([g["x"].mean(0) for g in X])
    if domain.task == "node":
        return domain.x[X]
    u, v = domain.x[X[:, 0]], domain.x[X[:, 1]]
    return np.hstack([u + v, u * v])


def logistic(domain, X, y, train, test):
    from sklearn.linear_model import LogisticRegression

    features = plain_features(domain, X)
    model = LogisticRegression(C=1.0, max_iter=2000).fit(features[train], y[train])
    return model.score(features[test], y[test])


def nearest_class(domain, X, y):
    features = plain_features(domain, X)[:, :N_FEATURES]  # an edge's sum: its classes' mean direction
    features = features / np.linalg.norm(features, axis=1, keepdims=True)
    return float(np.mean((features @ domain.class_embeddings.T).argmax(1) == y))


class _GNN(torch.nn.Module):
    def __init__(self, kind, in_dim, hidden, n_classes, task):
        from torch_geometric.nn import GCNConv, SAGEConv

        super().__init__()
        conv = GCNConv if kind == "gcn" else SAGEConv
        self.task = task
        self.convs = torch.nn.ModuleList([conv(in_dim, hidden), conv(hidden, hidden)])
        self.out = torch.nn.Sequential(torch.nn.Linear(2 * hidden if task == "edge" else hidden, hidden),
                                       torch.nn.ReLU(), torch.nn.Linear(hidden, n_classes))

    def forward(self, x, edge_index, batch=None, pairs=None):
        from torch_geometric.nn import global_mean_pool

        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i == 0:
                x = F.dropout(F.relu(x), 0.5, self.training)
        if self.task == "graph":
            x = global_mean_pool(x, batch)
        elif self.task == "edge":
            x = torch.cat([x[pairs[:, 0]] + x[pairs[:, 1]], x[pairs[:, 0]] * x[pairs[:, 1]]], dim=1)
        return self.out(x)


def gnn(kind, domain, X, y, train, test, seed, epochs=200):
    from torch_geometric.utils import to_undirected

    torch.manual_seed(seed)
    labels = torch.as_tensor(y)
    if domain.task == "graph":
        sizes = [len(g["x"]) for g in X]
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        x = torch.as_tensor(np.concatenate([g["x"] for g in X]), dtype=torch.float32)
        edges = torch.as_tensor(np.concatenate([g["edge_index"] + o for g, o in zip(X, offsets)], axis=1))
        batch = torch.repeat_interleave(torch.arange(len(X)), torch.as_tensor(sizes))
        pairs = None
    else:
        x, edges = torch.as_tensor(domain.x, dtype=torch.float32), torch.as_tensor(domain.edge_index)
        batch, pairs = None, (torch.as_tensor(X) if domain.task == "edge" else None)
    edges = to_undirected(edges)
    model = _GNN(kind, x.shape[1], 64, int(y.max()) + 1, domain.task)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=5e-4)
    train_t, test_t = torch.as_tensor(train), torch.as_tensor(test)

    def logits(rows):
        if domain.task == "graph":
            return model(x, edges, batch)[rows]
        if domain.task == "edge":
            return model(x, edges, pairs=pairs[rows])
        return model(x, edges)[rows]

    for _ in range(epochs):
        model.train()
        optimizer.zero_grad()
        F.cross_entropy(logits(train_t), labels[train_t]).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        return float((logits(test_t).argmax(1) == labels[test_t]).float().mean())


# ------------------------------------------------------------------ GIT
def git(pretrained, graph, task, **params):
    defaults = dict(hidden_dim=N_FEATURES, max_epochs=100, lr=1e-3, batch_size=256, device="cpu")
    return GITClassifier(pretrained=pretrained, graph=graph, task=task, **{**defaults, **params})


def git_finetune(pretrained, domain, X, graph, y, train, test, seed):
    model = git(pretrained, graph, domain.task, mode="finetune", random_state=seed)
    model.fit(take(X, train), y[train])
    return model.score(take(X, test), y[test])


def git_in_context(pretrained, domain, X, graph, y, train, test, seed):
    model = git(pretrained, graph, domain.task, mode="in_context", random_state=seed)
    model.fit(take(X, train), y[train])
    return model.score(take(X, test), y[test])


def git_zero_shot(pretrained, sibling, domain, seed):
    """Zero-shot on ``domain`` from its class embeddings; with a ``sibling`` (another graph of the domain),
    first specialize on it (its labels and class embeddings)."""
    if sibling is not None:
        X_s, graph_s, y_s = examples(sibling)
        rows = np.random.default_rng(seed).permutation(len(y_s))[:1000]
        pretrained = git(pretrained, graph_s, sibling.task, mode="zero_shot", specialize=True,
                         class_embeddings=sibling.class_embeddings, sft_epochs=50, random_state=seed)
        pretrained.fit(take(X_s, rows), y_s[rows])
    X, graph, y = examples(domain)
    model = git(pretrained, graph, domain.task, mode="zero_shot", class_embeddings=domain.class_embeddings,
                random_state=seed).fit(X)
    return model.score(X, y)


# ------------------------------------------------------------------ run
def run_seed(seed, pretrained, tasks):
    rows = {}

    def record(task, setting, name, value):
        rows.setdefault((task, setting), {}).setdefault(name, []).append(value)

    for task in tasks:
        domain, sibling = domain_pair(task, seed)
        X, graph, y = examples(domain)
        rng = np.random.default_rng(seed)
        train, test = split(y, 0.2, rng)
        if task == "edge":  # a subsample keeps the edge rows affordable
            train = rng.choice(train, min(len(train), 1500), replace=False)
            test = rng.choice(test, min(len(test), 4000), replace=False)
        record(task, "20% labels", "logreg", logistic(domain, X, y, train, test))
        record(task, "20% labels", "gcn", gnn("gcn", domain, X, y, train, test, seed))
        record(task, "20% labels", "sage", gnn("sage", domain, X, y, train, test, seed))
        record(task, "20% labels", "git scratch", git_finetune(None, domain, X, graph, y, train, test, seed))
        record(task, "20% labels", "git pretrained", git_finetune(pretrained, domain, X, graph, y, train, test, seed))
        for k in SHOTS:
            setting = f"{k}-shot"
            train_k, test_k = shots_split(y, k, rng)
            if task == "edge":
                test_k = rng.choice(test_k, min(len(test_k), 4000), replace=False)
            record(task, setting, "logreg", logistic(domain, X, y, train_k, test_k))
            record(task, setting, "gcn", gnn("gcn", domain, X, y, train_k, test_k, seed))
            record(task, setting, "sage", gnn("sage", domain, X, y, train_k, test_k, seed))
            record(task, setting, "git scratch", git_in_context(None, domain, X, graph, y, train_k, test_k, seed))
            record(task, setting, "git pretrained",
                   git_in_context(pretrained, domain, X, graph, y, train_k, test_k, seed))
        record(task, "zero-shot", "nearest class", nearest_class(domain, X, y))
        record(task, "zero-shot", "git scratch", git_zero_shot(None, None, domain, seed))
        record(task, "zero-shot", "git pretrained", git_zero_shot(pretrained, None, domain, seed))
        record(task, "zero-shot+SFT", "nearest class", nearest_class(domain, X, y))
        record(task, "zero-shot+SFT", "git scratch", git_zero_shot(None, sibling, domain, seed))
        record(task, "zero-shot+SFT", "git pretrained", git_zero_shot(pretrained, sibling, domain, seed))
    return rows


NAMES = ("logreg", "nearest class", "gcn", "sage", "git scratch", "git pretrained")


# ------------------------------------------------- in-context protocol
SEMANTIC = dict(n_nodes=1000, noise=3.0, homophily=0.85, degree=8.0, n_graphs=300, graph_size=(10, 30))
#: The probe of early stopping reads semantic domains of these seeds (never a benchmark or pretraining seed).
PROBE_SEED = 2000


def semantic_domain(task, seed):
    from skicml.datasets import make_semantic_graph_domains

    return make_semantic_graph_domains(1, task=task, n_classes=N_CLASSES[task], random_state=seed, **SEMANTIC)[0]


def backbone_path(args, width):
    """The backbone file of ``width``: ``--backbone`` (default ``run/git_semantic.pt``), with ``_w<width>``
    before the extension when ``--widths`` names several widths."""
    import os

    path = args.backbone or os.path.join("run", "git_semantic.pt")
    if len(args.widths) > 1:
        stem, ext = os.path.splitext(path)
        path = f"{stem}_w{width}{ext or '.pt'}"
    return path


def probe(encoder, domains, shots, width=None, n_sets=5):
    """Early stopping's probe: mean ``shots``-shot in-context accuracy (GIT's rule) of ``encoder`` (``None``:
    random weights of ``width``) on ``domains``, ``n_sets`` support sets each; also the per-domain values."""
    values = []
    for domain in domains:
        _, _, y = examples(domain)
        embedded = git_embeddings(domain, encoder, 0, width)
        rng = np.random.default_rng(PROBE_SEED)
        values.append(float(np.mean([nearest_centroid(embedded, y, *shots_split(y, shots, rng))
                                     for _ in range(n_sets)])))
    return float(np.mean(values)), values


def pretrain_semantic(args, width):
    """A GITEncoder of ``width`` pretrained on semantic domains of seeds 1000+ (never the benchmark's), saved
    to :func:`backbone_path` (read from there when the file exists).

    ``--pretrain-epochs`` epochs of GIT's objective; with ``--pretrain-patience P``, one epoch at a time
    (each continuing from the last, with a fresh optimiser), scored after each by :func:`probe` on one
    held-out semantic domain of each task kind (seeds 2000+), saving the best epoch's weights and stopping
    after ``P`` epochs without improvement (random weights are probed too, for comparison, not saved).
    """
    import os

    from skicml.graph import GITEncoder, TaskSet

    path = backbone_path(args, width)
    if os.path.exists(path):
        print(f"backbone of width {width}: {path} (exists, not retrained)", flush=True)
        return path
    task_sets = []
    for index in range(args.pretrain_domains):
        for offset, task in enumerate(("node", "edge", "graph")):
            domain = semantic_domain(task, 1000 + 3 * index + offset)
            if task == "graph":
                task_sets.append(TaskSet(domain.graphs, task="graph"))
            else:
                graph = {"x": domain.x, "edge_index": domain.edge_index}
                index_ = domain.pairs[np.random.default_rng(index).permutation(len(domain.pairs))[:1000]] \
                    if task == "edge" else None
                task_sets.append(TaskSet(graph, task=task, index=index_))
    started = time.perf_counter()
    settings = dict(batch_size=256, lr=1e-3, device="cpu", verbose=0)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if args.pretrain_patience is None:
        encoder = GITEncoder(hidden_dim=width, max_epochs=args.pretrain_epochs, random_state=0,
                             **settings).fit(task_sets)
        encoder.save(path)
        losses = encoder.history_["train_loss"]
        print(f"pretrained width {width} on {args.pretrain_domains} semantic domains of each task kind, "
              f"{args.pretrain_epochs} epochs, {time.perf_counter() - started:.0f} s; loss {losses[0]:.3f} -> "
              f"{losses[-1]:.3f}; saved to {path}", flush=True)
        return path
    probe_domains = [semantic_domain(task, PROBE_SEED + offset)
                     for offset, task in enumerate(("node", "edge", "graph"))]
    print(f"  width {width} random weights: probe {probe(None, probe_domains, args.shots, width)[0]:.3f}",
          flush=True)
    encoder, best, best_epoch = None, -np.inf, 0
    for epoch in range(1, args.pretrain_epochs + 1):
        encoder = GITEncoder(pretrained=encoder, hidden_dim=width, max_epochs=1, random_state=epoch - 1,
                             **settings).fit(task_sets)
        score, values = probe(encoder, probe_domains, args.shots)
        print(f"  width {width} epoch {epoch}: loss {encoder.history_['train_loss'][-1]:.3f}, probe {score:.3f} "
              f"(node {values[0]:.3f}, edge {values[1]:.3f}, graph {values[2]:.3f}), "
              f"{time.perf_counter() - started:.0f} s", flush=True)
        if score > best:
            best, best_epoch = score, epoch
            encoder.save(path)
        elif epoch - best_epoch >= args.pretrain_patience:
            break
    print(f"pretrained width {width}: best probe {best:.3f} at epoch {best_epoch}, "
          f"{time.perf_counter() - started:.0f} s; saved to {path}", flush=True)
    return path


def task_features(domain, features):
    """One row a task: a node's features, the mean of an edge's end nodes, the mean of a graph's nodes."""
    if domain.task == "graph":
        return np.stack([f.mean(0) for f in features])
    if domain.task == "node":
        return features
    return (features[domain.pairs[:, 0]] + features[domain.pairs[:, 1]]) / 2


def nearest_centroid(rows, labels, support, query):
    """Accuracy on ``query`` of GIT's in-context rule on ``rows``: a class's prototype is the mean of its
    support rows' unit vectors, and a query goes to the prototype of highest cosine (the official
    ``proto_classify``, skicml's ``prototype_logits``). On GIT's task-tree embeddings it is what
    ``GITClassifier(mode="in_context").score`` returns; on features, the training-free centroid baseline."""
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True).clip(1e-12)
    classes = np.unique(labels[support])
    prototypes = np.stack([unit[support][labels[support] == c].mean(0) for c in classes])
    prototypes = prototypes / np.linalg.norm(prototypes, axis=1, keepdims=True).clip(1e-12)
    return float(np.mean(classes[(unit[query] @ prototypes.T).argmax(1)] == labels[query]))


def git_embeddings(domain, pretrained, seed, hidden_dim):
    """Task-tree embeddings of every task of ``domain`` (what GIT's prototypes read)."""
    X, graph, y = examples(domain)
    model = git(pretrained, graph, domain.task, mode="in_context", random_state=seed, hidden_dim=hidden_dim)
    model.fit(X, y)  # in context: fit only stores prototypes; transform reads the encoder
    return model.transform(X)


def contenders(args):
    """``{suffix: (scratch width, pretrained backbone)}``, one GIT pair a width (suffix ``""`` for one)."""
    if args.domains == "sbm":
        return {"": (N_FEATURES, args.pretrained)}
    several = len(args.widths) > 1
    return {(f" {w}" if several else ""): (w, pretrain_semantic(args, w)) for w in args.widths}


def run_in_context(seed, gits, tasks, args, done=None, record=None):
    """``{task: {contender: mean accuracy}}`` of one seed; ``(seed, task)`` pairs in ``done`` are taken from
    there, and every task computed here is handed to ``record(seed, task, scores)`` as soon as it ends."""
    rows = {}
    for task in tasks:
        if done is not None and (seed, task) in done:
            rows[task] = done[seed, task]
            print(f"  seed {seed} {task}: in the results file, not rerun", flush=True)
            continue
        started = time.perf_counter()
        domain = (semantic_domain(task, seed) if args.domains == "semantic"
                  else make_graph_domains(1, task=task, n_classes=N_CLASSES[task], random_state=seed, **DOMAIN)[0])
        X, graph, y = examples(domain)
        if task == "graph":
            raw = task_features(domain, [g["x"] for g in domain.graphs])
            smooth = task_features(domain, [propagated(g["x"], g["edge_index"]) for g in domain.graphs])
        else:
            raw = task_features(domain, domain.x)
            smooth = task_features(domain, propagated(domain.x, domain.edge_index))
        embedded = {}
        for suffix, (width, pretrained) in gits.items():
            embedded[f"git scratch{suffix}"] = [git_embeddings(domain, None, 100 + i, width)
                                                for i in range(args.scratch_inits)]
            embedded[f"git pretrained{suffix}"] = [git_embeddings(domain, pretrained, seed, width)]
        rng = np.random.default_rng(seed)
        scores = {}
        for index in range(args.support_sets):
            support, query = shots_split(y, args.shots, rng)
            if task == "edge":
                query = rng.choice(query, min(len(query), 4000), replace=False)
            add = lambda name, value: scores.setdefault(name, []).append(value)  # noqa: E731
            for name, runs in embedded.items():
                add(name, float(np.mean([nearest_centroid(e, y, support, query) for e in runs])))
            add("centroid x", nearest_centroid(raw, y, support, query))
            add("centroid A^2 x", nearest_centroid(smooth, y, support, query))
            add("logreg", logistic(domain, X, y, support, query))
            add("gcn", gnn("gcn", domain, X, y, support, query, seed + index))
        rows[task] = {name: float(np.mean(values)) for name, values in scores.items()}
        if record is not None:
            record(seed, task, rows[task], time.perf_counter() - started)
        print(f"  seed {seed} {task}: " + ", ".join(f"{n} {v:.3f}" for n, v in rows[task].items())
              + f" ({time.perf_counter() - started:.0f} s)", flush=True)
    return rows


def propagated(x, edge_index, hops=2):
    """``A_hat^hops x`` with ``A_hat = D^-1/2 (A + I) D^-1/2`` (SGC's propagation)."""
    import scipy.sparse as sp

    n = len(x)
    a = sp.coo_matrix((np.ones(edge_index.shape[1]), (edge_index[0], edge_index[1])), shape=(n, n))
    a = ((a + a.T) > 0).astype(np.float64) + sp.eye(n)
    d = np.asarray(a.sum(1)).ravel() ** -0.5
    a = sp.diags(d) @ a @ sp.diags(d)
    for _ in range(hops):
        x = a @ x
    return np.asarray(x)


BASELINE_NAMES = ("centroid x", "centroid A^2 x", "logreg", "gcn")
#: The scoring rule of this version's rows; a results file's rows of another rule are not mixed in.
RULE = "cosine prototypes"


def _fingerprint(backbone):
    """A shipped name as it is; a file by the first 16 hex digits of its SHA-256."""
    import hashlib
    import os

    if isinstance(backbone, (str, os.PathLike)) and os.path.isfile(backbone):
        with open(backbone, "rb") as handle:
            return f"{os.path.basename(backbone)}:{hashlib.sha256(handle.read()).hexdigest()[:16]}"
    return str(backbone)


def in_context_settings(args, gits):
    """What makes two rows comparable: a results file's rows with other settings are neither reused nor
    tabulated."""
    return {"domains": args.domains, "shots": args.shots, "support_sets": args.support_sets,
            "scratch_inits": args.scratch_inits, "rule": RULE,
            "git": {suffix.strip() or "-": [width, _fingerprint(backbone)]
                    for suffix, (width, backbone) in gits.items()}}


def read_results(path, settings):
    """``{(seed, task): scores}`` of the rows of the JSON-lines file ``path`` whose settings are
    ``settings`` (the last row wins); empty when there is no file."""
    import json
    import os

    done = {}
    if path is None or not os.path.exists(path):
        return done
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a killed run
                continue
            if row.get("settings") == settings:
                done[int(row["seed"]), row["task"]] = row["scores"]
    return done


def results_writer(path, settings):
    """``record(seed, task, scores, seconds)`` appending one JSON line to ``path``, flushed and synced, so
    that a run killed midway keeps every finished task."""
    import json
    import os

    if path is None:
        return None
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)

    def record(seed, task, scores, seconds):
        row = {"seed": int(seed), "task": task, "scores": scores, "seconds": round(float(seconds), 1),
               "settings": settings, "finished": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
        with open(path, "a") as handle:
            handle.write(json.dumps(row) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    return record


def print_in_context_table(table, args, names):
    """``table``: ``{task: {seed: scores}}``."""
    seeds = sorted({seed for rows in table.values() for seed in rows})
    print(f"\n{args.shots}-shot in-context accuracy on held-out {args.domains} domains, seeds {seeds}, "
          f"{args.support_sets} support sets a seed (scratch: {args.scratch_inits} initialisations; rule: {RULE}); "
          "seed values in brackets")
    for task, by_seed in table.items():
        if not by_seed:
            continue
        order = sorted(by_seed)
        print(f"\n{task} (seeds {order})")
        for name in names:
            values = [by_seed[s][name] for s in order if name in by_seed[s]]
            if values:
                print(f"  {name:20s} {np.mean(values):.3f} ± {np.std(values):.3f}  "
                      f"[{', '.join(f'{v:.3f}' for v in values)}]")
        best = max(BASELINE_NAMES, key=lambda n: np.mean([by_seed[s][n] for s in order]))
        best_mean = np.mean([by_seed[s][best] for s in order])
        for pretrained in (n for n in names if n.startswith("git pretrained")):
            scratch = pretrained.replace("pretrained", "scratch")
            signs = "".join("+" if p > q else "-" if p < q else "0"
                            for p, q in ((by_seed[s][pretrained], by_seed[s][scratch]) for s in order))
            print(f"  {pretrained} - scratch by seed: {signs}; {pretrained} / best baseline ({best}): "
                  f"{np.mean([by_seed[s][pretrained] for s in order]) / best_mean:.3f}")


def main_in_context(args):
    started = time.perf_counter()
    if args.domains == "sbm":
        args.widths = [N_FEATURES]
    else:
        args.widths = [int(w) for w in args.widths.split(",")] if args.widths else [args.hidden_dim]
    seeds = ([int(s) for s in args.seed_list.split(",")] if args.seed_list else list(range(args.seeds)))
    tasks = args.tasks.split(",")
    if args.summarize:
        if not args.results:
            raise SystemExit("--summarize reads --results: name the file.")
        gits = {(f" {w}" if len(args.widths) > 1 else ""): (w, backbone_path(args, w) if args.domains == "semantic"
                                                              else args.pretrained) for w in args.widths}
    else:
        gits = contenders(args)
    names = BASELINE_NAMES + tuple(f"git {kind}{suffix}" for suffix in gits for kind in ("scratch", "pretrained"))
    settings = in_context_settings(args, gits)
    done = read_results(args.results, settings)
    record = results_writer(args.results, settings)
    if not args.summarize:
        for seed in seeds:
            for task, values in run_in_context(seed, gits, tasks, args, done, record).items():
                done[seed, task] = values
            print(f"seed {seed} done at {time.perf_counter() - started:.0f} s", flush=True)
    # every seed of the results file with these settings (and this run's seeds without one)
    table = {task: {seed: values for (seed, t), values in sorted(done.items()) if t == task} for task in tasks}
    print_in_context_table(table, args, names)
    print(f"\n{time.perf_counter() - started:.0f} s")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--pretrained", default="git-sbm-qm9-small", help="shipped name or file")
    parser.add_argument("--tasks", default="node,edge,graph")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--protocol", choices=["full", "in-context"], default="full")
    parser.add_argument("--domains", choices=["sbm", "semantic"], default="sbm")
    parser.add_argument("--shots", type=int, default=5)
    parser.add_argument("--support-sets", type=int, default=20)
    parser.add_argument("--scratch-inits", type=int, default=10)
    parser.add_argument("--hidden-dim", type=int, default=128, help="semantic: the pretrained and scratch width")
    parser.add_argument("--pretrain-domains", type=int, default=4, help="semantic domains of each task kind")
    parser.add_argument("--pretrain-epochs", type=int, default=6)
    parser.add_argument("--backbone", default=None, help="semantic: the pretrained file (made when missing)")
    parser.add_argument("--seed-list", default=None,
                        help="in-context: comma-separated seeds to run (e.g. 1,2), instead of 0..--seeds-1")
    parser.add_argument("--results", default=None,
                        help="in-context: JSON-lines file; every finished (seed, task) is appended at once, rows "
                             "already there with the same settings are not rerun, and the table covers them all")
    parser.add_argument("--summarize", action="store_true", help="in-context: only print --results' table")
    parser.add_argument("--widths", default=None,
                        help="semantic: comma-separated widths (e.g. 64,128,384), one pretrained backbone and "
                             "scratch encoder each; default --hidden-dim")
    parser.add_argument("--pretrain-patience", type=int, default=None,
                        help="semantic: pretrain epoch by epoch, keep the epoch of best probe accuracy (5-shot in "
                             "context on held-out domains of seeds 2000+) and stop after this many without gain")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.protocol == "in-context":
        return main_in_context(args)
    started = time.perf_counter()
    table = {}
    for seed in range(args.seeds):
        for key, values in run_seed(seed, args.pretrained, args.tasks.split(",")).items():
            for name, scores in values.items():
                table.setdefault(key, {}).setdefault(name, []).extend(scores)
        print(f"seed {seed} done at {time.perf_counter() - started:.0f} s", flush=True)
    header = f"{'task':6} {'setting':11}" + "".join(f"{name:>16}" for name in NAMES) + f"{'ratio':>8}"
    print(f"\nAccuracy, mean ± std over {args.seeds} seeds (ratio: GIT pretrained / best baseline)")
    print(header)
    for (task, setting), values in table.items():
        cells = "".join(f"{np.mean(values[n]):>10.3f}±{np.std(values[n]):.3f}" if n in values else f"{'':>16}"
                        for n in NAMES)
        best = max(np.mean(v) for n, v in values.items() if not n.startswith("git"))
        print(f"{task:6} {setting:11}{cells}{np.mean(values['git pretrained']) / best:>8.2f}")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
