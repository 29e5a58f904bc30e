"""GIT's link prediction and multi-task binary molecule protocol, ROC AUC against the baselines a user would try.

Run::

    python benchmarks/bench_graph_git_tasks.py --part link --seeds 3
    python benchmarks/bench_graph_git_tasks.py --part multitask --seeds 3

``--part link``: every seed draws one held-out contextual-SBM domain
(:func:`~skicml.datasets.make_graph_domains`, seeds below 100, which the
shipped backbone's pretraining never drew; 1,000 nodes, 64 features, noise
2.0, homophily 0.7, degree 8, 5 classes). 10% of its edges are held out as
test links with as many non-edges; the rest is the observed graph.
Contenders, ROC AUC on the held-out pairs:

- ``GITClassifier(task="link")`` fine-tuned (dot product, BCE against
  sampled non-edges, 50 epochs) from the shipped backbone and from random
  weights, and zero-shot (cosine of the end nodes' embeddings, no training)
  from both;
- training-free scores: the cosine of the raw features, of the propagated
  features ``A_hat^2 X`` (SGC's), and Adamic-Adar;
- a graph auto-encoder (two GCN layers, dot product, BCE with as many
  sampled non-edges, 200 full-batch epochs; torch_geometric).

``--part multitask``: the paper's molecule protocol on QM9's benchmark pool
(``qm9_id % 10 == 0``, never seen by either shipped backbone): six binary
tasks, each a DFT property above its median over the seed's 1,000 training
molecules (HOMO-LUMO gap, HOMO, LUMO, dipole moment, polarizability, zero
point vibrational energy), scored by the mean per-task ROC AUC on 1,000 test
molecules.

- in context, from 10 or 40 labelled molecules (every task needs a positive
  and a negative among them; 20 support sets a seed): GIT's positive and
  negative prototypes a task (``GITClassifier(task="graph",
  mode="in_context")`` with a 2-D ``y``) from the shipped backbone and from
  random weights (a fresh initialisation per support set), the same
  prototypes on GraphGPT's shipped backbone's embeddings
  (``GraphGPTEncoder``), on Morgan fingerprints (no network), and a logistic
  regression on the fingerprints;
- with the 1,000 training molecules labelled: GIT fine-tuned (T logits,
  masked BCE, 60 epochs) from the backbone and from random weights, a
  logistic regression on GraphGPT's embeddings (its linear probe) and a
  random forest on the fingerprints.

The ratio column is the shipped-backbone GIT row over the best non-GIT
contender of the setting.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import roc_auc_score

from bench_graph_git import propagated

from skicml.datasets import make_graph_domains
from skicml.graph import GITClassifier

BACKBONE = "git-sbm-qm9-small"
DOMAIN = dict(n_nodes=1000, n_features=64, noise=2.0, homophily=0.7, degree=8.0, n_classes=5)
PROPERTIES = ["homo_lumo_gap", "homo", "lumo", "dipole_moment", "polarizability", "zpve"]


# =================================================================== links
def link_split(domain, seed, fraction=0.1):
    """``(observed edges (2, E'), test pairs (n, 2), test labels)``: held-out edges and as many non-edges."""
    rng = np.random.default_rng(seed)
    edges = domain.edge_index.T[rng.permutation(domain.edge_index.shape[1])]
    n_test = int(fraction * len(edges))
    n = len(domain.x)
    existing = set((edges[:, 0] * n + edges[:, 1]).tolist()) | set((edges[:, 1] * n + edges[:, 0]).tolist())
    negative = []
    while len(negative) < n_test:
        u, v = rng.integers(n, size=2)
        if u != v and u * n + v not in existing:
            negative.append((u, v))
            existing.add(u * n + v)
    pairs = np.vstack([edges[:n_test], np.array(negative)])
    return edges[n_test:].T, pairs, np.r_[np.ones(n_test), np.zeros(n_test)]


def cosine(x, pairs):
    u = x[pairs[:, 0]] / np.linalg.norm(x[pairs[:, 0]], axis=1, keepdims=True).clip(1e-12)
    v = x[pairs[:, 1]] / np.linalg.norm(x[pairs[:, 1]], axis=1, keepdims=True).clip(1e-12)
    return (u * v).sum(1)


def adamic_adar(n, edges, pairs):
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(edges.T.tolist())
    return np.array([score for _, _, score in nx.adamic_adar_index(graph, pairs.tolist())])


def graph_autoencoder(x, edges, pairs, seed, epochs=200):
    from torch_geometric.nn import GCNConv
    from torch_geometric.utils import negative_sampling, to_undirected

    torch.manual_seed(seed)
    x = torch.as_tensor(x, dtype=torch.float32)
    edge_index = to_undirected(torch.as_tensor(edges))
    convs = torch.nn.ModuleList([GCNConv(x.shape[1], 64), GCNConv(64, 64)])
    optimizer = torch.optim.Adam(convs.parameters(), lr=1e-2)

    def encode():
        return convs[1](F.relu(convs[0](x, edge_index)), edge_index)

    positive = torch.as_tensor(edges)
    for _ in range(epochs):
        optimizer.zero_grad()
        z = encode()
        negative = negative_sampling(edge_index, num_nodes=len(x), num_neg_samples=positive.shape[1])
        both = torch.cat([positive, negative], dim=1)
        logits = (z[both[0]] * z[both[1]]).sum(1)
        target = torch.cat([torch.ones(positive.shape[1]), torch.zeros(negative.shape[1])])
        F.binary_cross_entropy_with_logits(logits, target).backward()
        optimizer.step()
    with torch.no_grad():
        z = encode()
        pairs = torch.as_tensor(pairs)
        return (z[pairs[:, 0]] * z[pairs[:, 1]]).sum(1).numpy()


def run_links(seed, args):
    domain = make_graph_domains(1, random_state=seed, **DOMAIN)[0]
    observed, pairs, y = link_split(domain, seed)
    graph = {"x": domain.x, "edge_index": observed}
    scores = {
        "cosine x": cosine(domain.x, pairs),
        "cosine A^2 x": cosine(propagated(domain.x, observed), pairs),
        "adamic-adar": adamic_adar(len(domain.x), observed, pairs),
        "gae (gcn)": graph_autoencoder(domain.x, observed, pairs, seed, args.gae_epochs),
    }
    for name, pretrained in (("pretrained", args.pretrained), ("scratch", None)):
        common = dict(task="link", graph=graph, pretrained=pretrained, hidden_dim=64, device="cpu", verbose=0,
                      random_state=seed)
        model = GITClassifier(mode="zero_shot", **common).fit(observed.T)
        scores[f"git {name} zero-shot"] = model.predict_proba(pairs)[:, 1]
        model = GITClassifier(mode="finetune", max_epochs=args.git_epochs, lr=1e-3, **common).fit(observed.T)
        scores[f"git {name} fine-tuned"] = model.predict_proba(pairs)[:, 1]
    return {name: roc_auc_score(y, s) for name, s in scores.items()}


# ============================================================== molecules
def molecule_tasks(seed, n_train, n_test):
    """``(train smiles, Y train, test smiles, Y test)``: six properties above their training medians."""
    from skicml.datasets import load_qm9

    frame = load_qm9(targets=PROPERTIES)
    frame = frame[frame.index.to_numpy() % 10 == 0]
    order = np.random.default_rng(seed).permutation(len(frame))
    train, test = frame.iloc[order[n_test:n_test + n_train]], frame.iloc[order[:n_test]]
    median = train[PROPERTIES].median()
    return (train["smiles"].to_numpy(dtype=object), (train[PROPERTIES] > median).to_numpy(np.float64),
            test["smiles"].to_numpy(dtype=object), (test[PROPERTIES] > median).to_numpy(np.float64))


def mean_auc(Y, scores):
    return float(np.mean([roc_auc_score(Y[:, t], scores[:, t]) for t in range(Y.shape[1])]))


def prototype_scores(train, Y, test):
    """GIT's protocol on fixed embeddings: each task's positive prototype's cosine minus its negative one's."""
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True).clip(1e-12)  # noqa: E731
    train, test = unit(np.asarray(train, np.float64)), unit(np.asarray(test, np.float64))
    positive = unit((Y == 1).T @ train / (Y == 1).sum(0)[:, None])
    negative = unit((Y == 0).T @ train / (Y == 0).sum(0)[:, None])
    return test @ positive.T - test @ negative.T


def support_sets(Y, size, count, rng):
    """``count`` random sets of ``size`` training rows in which every task has a positive and a negative."""
    out = []
    while len(out) < count:
        rows = rng.choice(len(Y), size, replace=False)
        if ((Y[rows] == 1).any(0) & (Y[rows] == 0).any(0)).all():
            out.append(rows)
    return out


def run_multitask(seed, args):
    from bench_graph_git_molecules import git_inputs
    from bench_graph_qm9 import morgan_fingerprints
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression

    from skicml.graph import GraphGPTEncoder, smiles_to_graphs

    train, Y, test, Y_test = molecule_tasks(seed, args.n_train, args.n_test)
    graphs_train, graphs_test = git_inputs(smiles_to_graphs(list(train))), git_inputs(smiles_to_graphs(list(test)))
    fp_train, fp_test = morgan_fingerprints(train), morgan_fingerprints(test)
    started = time.perf_counter()
    gpt = GraphGPTEncoder(pretrained="graphgpt-qm9-small", max_epochs=0, device="cpu", verbose=0, random_state=0)
    gpt.fit(list(train[:2]))  # max_epochs=0: loads the backbone as it is
    gpt_train, gpt_test = gpt.transform(list(train)), gpt.transform(list(test))
    print(f"  graphgpt embeddings {time.perf_counter() - started:.0f} s", flush=True)
    rng = np.random.default_rng(seed)
    rows = {}

    def record(setting, name, value):
        rows.setdefault(setting, {}).setdefault(name, []).append(value)

    git_pre = GITClassifier(pretrained=args.pretrained, task="graph", mode="in_context", device="cpu", verbose=0)
    for size in args.support_sizes:
        setting = f"{size} labelled"
        for index, support in enumerate(support_sets(Y, size, args.support_sets, rng)):
            Ys = Y[support]
            part = [graphs_train[i] for i in support]
            record(setting, "git pretrained",
                   mean_auc(Y_test, git_pre.set_params(random_state=index).fit(part, Ys).decision_function(graphs_test)))
            scratch = GITClassifier(task="graph", mode="in_context", hidden_dim=64, text_encoder="tfidf-svd",
                                    text_dim=64, device="cpu", verbose=0, random_state=index)
            record(setting, "git scratch", mean_auc(Y_test, scratch.fit(part, Ys).decision_function(graphs_test)))
            record(setting, "graphgpt prototypes", mean_auc(Y_test, prototype_scores(gpt_train[support], Ys, gpt_test)))
            record(setting, "fingerprint prototypes",
                   mean_auc(Y_test, prototype_scores(fp_train[support], Ys, fp_test)))
            logistic = np.stack([LogisticRegression(max_iter=1000).fit(fp_train[support], Ys[:, t])
                                 .decision_function(fp_test) for t in range(Y.shape[1])], axis=1)
            record(setting, "fingerprint logreg", mean_auc(Y_test, logistic))
    setting = f"{args.n_train} labelled"
    for name, pretrained in (("git pretrained", args.pretrained), ("git scratch", None)):
        size = {} if pretrained else dict(hidden_dim=64, text_encoder="tfidf-svd", text_dim=64)
        model = GITClassifier(pretrained=pretrained, task="graph", mode="finetune", max_epochs=args.git_epochs,
                              batch_size=64, lr=1e-3, device="cpu", verbose=0, random_state=seed, **size)
        record(setting, name, mean_auc(Y_test, model.fit(graphs_train, Y).decision_function(graphs_test)))
    probe = np.stack([LogisticRegression(max_iter=2000).fit(gpt_train, Y[:, t]).decision_function(gpt_test)
                      for t in range(Y.shape[1])], axis=1)
    record(setting, "graphgpt probe", mean_auc(Y_test, probe))
    forest = RandomForestClassifier(n_estimators=200, n_jobs=1, random_state=seed).fit(fp_train, Y.astype(int))
    record(setting, "fingerprint forest",
           mean_auc(Y_test, np.stack([p[:, 1] for p in forest.predict_proba(fp_test)], axis=1)))
    return rows


# ==================================================================== main
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["link", "multitask"], required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--pretrained", default=BACKBONE)
    parser.add_argument("--git-epochs", type=int, default=None, help="link: 50, multitask: 60")
    parser.add_argument("--gae-epochs", type=int, default=200)
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--support-sizes", type=int, nargs="+", default=[10, 40])
    parser.add_argument("--support-sets", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    args.git_epochs = args.git_epochs or (50 if args.part == "link" else 60)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    started = time.perf_counter()
    table = {}
    for seed in range(args.seeds):
        if args.part == "link":
            result = {"held-out links": {name: [value] for name, value in run_links(seed, args).items()}}
        else:
            result = run_multitask(seed, args)
        for setting, values in result.items():
            for name, scores in values.items():
                table.setdefault(setting, {}).setdefault(name, []).append(float(np.mean(scores)))
        print(f"seed {seed} done at {time.perf_counter() - started:.0f} s", flush=True)
    what = "link ROC AUC" if args.part == "link" else "mean per-task ROC AUC over 6 QM9 tasks"
    print(f"\n{what}, mean ± sd over {args.seeds} seeds (seed values in brackets)")
    for setting, values in table.items():
        print(f"\n{setting}")
        baselines = {n: np.mean(v) for n, v in values.items() if not n.startswith("git")}
        best = max(baselines, key=baselines.get)
        for name, scores in values.items():
            print(f"  {name:26s} {np.mean(scores):.3f} ± {np.std(scores):.3f}  "
                  f"[{', '.join(f'{s:.3f}' for s in scores)}]")
        for name in [n for n in values if n.startswith("git") and "pretrained" in n]:
            print(f"  ratio {name} / best baseline ({best}): {np.mean(values[name]) / baselines[best]:.3f}")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
