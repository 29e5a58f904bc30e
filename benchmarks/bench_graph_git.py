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
- training-free nearest-centroid prototypes (mean unit vector a class,
  cosine) on the raw features and on propagated features ``A_hat^2 X``
  (SGC's; an edge reads the mean of its end nodes, a graph the mean of its
  nodes, as GIT's task-trees do);
- a logistic regression on the raw features and a GCN (200 epochs) trained
  on the few labels.

It prints mean accuracy, the seed values, the sign of pretrained minus
scratch per seed, and GIT pretrained over the best baseline.
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


def semantic_domain(task, seed):
    from skicml.datasets import make_semantic_graph_domains

    return make_semantic_graph_domains(1, task=task, n_classes=N_CLASSES[task], random_state=seed, **SEMANTIC)[0]


def pretrain_semantic(args):
    """A GITEncoder pretrained on semantic domains of seeds 1000+ (never the benchmark's), saved to a file."""
    import os

    from skicml.graph import GITEncoder, TaskSet

    path = args.backbone or os.path.join("run", "git_semantic.pt")
    if os.path.exists(path):
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
    encoder = GITEncoder(hidden_dim=args.hidden_dim, max_epochs=args.pretrain_epochs, batch_size=256, lr=1e-3,
                         device="cpu", verbose=0, random_state=0).fit(task_sets)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    encoder.save(path)
    print(f"pretrained {args.pretrain_domains} semantic domains of each task kind, {args.pretrain_epochs} epochs, "
          f"{time.perf_counter() - started:.0f} s; loss {encoder.history_['train_loss'][0]:.3f} -> "
          f"{encoder.history_['train_loss'][-1]:.3f}; saved to {path}", flush=True)
    return path


def task_features(domain, features):
    """One row a task: a node's features, the mean of an edge's end nodes, the mean of a graph's nodes."""
    if domain.task == "graph":
        return np.stack([f.mean(0) for f in features])
    if domain.task == "node":
        return features
    return (features[domain.pairs[:, 0]] + features[domain.pairs[:, 1]]) / 2


def nearest_centroid(rows, labels, support, query):
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True).clip(1e-12)
    classes = np.unique(labels[support])
    prototypes = np.stack([unit[support][labels[support] == c].mean(0) for c in classes])
    return float(np.mean(classes[(unit[query] @ prototypes.T).argmax(1)] == labels[query]))


def git_embeddings(domain, pretrained, seed, hidden_dim):
    """Task-tree embeddings of every task of ``domain`` (what GIT's prototypes read)."""
    X, graph, y = examples(domain)
    model = git(pretrained, graph, domain.task, mode="in_context", random_state=seed, hidden_dim=hidden_dim)
    model.fit(X, y)  # in context: fit only stores prototypes; transform reads the encoder
    return model.transform(X)


def run_in_context(seed, pretrained, tasks, args):
    rows = {}
    for task in tasks:
        domain = (semantic_domain(task, seed) if args.domains == "semantic"
                  else make_graph_domains(1, task=task, n_classes=N_CLASSES[task], random_state=seed, **DOMAIN)[0])
        X, graph, y = examples(domain)
        if task == "graph":
            raw = task_features(domain, [g["x"] for g in domain.graphs])
            smooth = task_features(domain, [propagated(g["x"], g["edge_index"]) for g in domain.graphs])
        else:
            raw = task_features(domain, domain.x)
            smooth = task_features(domain, propagated(domain.x, domain.edge_index))
        width = None if args.domains == "semantic" else N_FEATURES
        embedded = {"git pretrained": [git_embeddings(domain, pretrained, seed, width)],
                    "git scratch": [git_embeddings(domain, None, 100 + i, args.hidden_dim if width is None else width)
                                    for i in range(args.scratch_inits)]}
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
        print(f"  seed {seed} {task}: " + ", ".join(f"{n} {v:.3f}" for n, v in rows[task].items()), flush=True)
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


IC_NAMES = ("centroid x", "centroid A^2 x", "logreg", "gcn", "git scratch", "git pretrained")


def main_in_context(args):
    started = time.perf_counter()
    pretrained = pretrain_semantic(args) if args.domains == "semantic" else args.pretrained
    tasks = args.tasks.split(",")
    table = {task: {} for task in tasks}
    for seed in range(args.seeds):
        for task, values in run_in_context(seed, pretrained, tasks, args).items():
            for name, value in values.items():
                table[task].setdefault(name, []).append(value)
        print(f"seed {seed} done at {time.perf_counter() - started:.0f} s", flush=True)
    print(f"\n{args.shots}-shot in-context accuracy on held-out {args.domains} domains, mean over {args.seeds} seeds "
          f"of {args.support_sets} support sets (scratch: {args.scratch_inits} initialisations); seed values in "
          "brackets")
    for task, values in table.items():
        print(f"\n{task}")
        for name in IC_NAMES:
            print(f"  {name:16s} {np.mean(values[name]):.3f} ± {np.std(values[name]):.3f}  "
                  f"[{', '.join(f'{v:.3f}' for v in values[name])}]")
        signs = "".join("+" if p > s else "-" if p < s else "0"
                        for p, s in zip(values["git pretrained"], values["git scratch"]))
        best = max((n for n in IC_NAMES if not n.startswith("git")), key=lambda n: np.mean(values[n]))
        print(f"  pretrained - scratch by seed: {signs}; git pretrained / best baseline ({best}): "
              f"{np.mean(values['git pretrained']) / np.mean(values[best]):.3f}")
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
