"""``skicml pretrain git``: pretrain the shipped GIT backbone on a multi-domain collection of task sets.

The recipe behind ``skicml/graph/_git/_weights/``::

    skicml pretrain git --threads 1 --checkpoint run/git.ckpt --export git.pt

(1,500 steps of 256 task-trees, Adam at 1e-3, no alignment term; about
four minutes on one CPU thread, and it resumes from ``--checkpoint``.)

The collection (GIT spec, section 5), every part read or generated offline:

- contextual-SBM domains (:func:`~skicml.datasets.make_graph_domains`) with
  node, edge and graph tasks, each drawn with its own class count,
  homophily, noise, degree and domain shift, in one shared 64-d "text"
  space. Their seeds (``--seed`` and up, past 1,000) never meet those of the
  GIT benchmark and tests (below 100), so its domains are held out;
- QM9 molecules as graph tasks (``qm9pack``; only ``qm9_id % 10 != 0``, the
  benchmark pool stays unseen), each atom a sentence
  (:func:`~skicml.graph.atom_descriptions`) embedded by a TF-IDF + SVD text
  encoder fitted here and shipped in the file, so that ``text_encoder=None``
  reads molecules the way pretraining did.

Every step draws a batch of tasks, each task set weighed equally, and takes
one step of GIT's objective (:class:`~skicml.graph.GITPretrainObjective`)
on their sampled task-trees. Training resumes exactly from
``--checkpoint``; ``--max-minutes`` stops a run early. Every
``--eval-every`` steps, 5-shot in-context accuracy on two held-out node
domains says whether the representation is getting more useful.

The alignment term is off (``--align-weight 0``; the official weight is
10). At a learning rate that moves the weights, it pulls every embedding
toward the batch mean and the representation collapses: 5-shot accuracy on
the probe domains fell from 0.41 at step 1,000 to 0.27 at step 6,000 at weight 10
(chance 0.20), while weight 0 ends at 0.72, and the shipped backbone gives
0.77 on the benchmark's held-out domains against 0.63 from random weights
(``doc/git.rst``, "Pretraining"). The official learning rate,
1e-7, barely moves the weights, which hides this.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from ..._weights import save_weights
from ...utils.pretraining import add_run_options, recipe_provenance, run_recipe, set_threads
from .._chem import atom_descriptions, smiles_to_graphs
from ._backbone import TaskTreeNet
from ._data import TaskSet, build_task_graph, read_task_sets
from ._model import GITModel, GITPretrainObjective, class_prototypes, prototype_logits
from ._text import TfidfSVDTextEncoder

__all__ = ["main", "in_context_accuracy", "sbm_task_sets"]

#: ``skicml pretrain git`` (found by :func:`skicml.utils.discovery.all_pretrain_recipes`).
RECIPE_NAME = "git"

FEATURE_DIM = 64


def sbm_task_sets(n_domains, seed, n_features=FEATURE_DIM, n_nodes=1000):
    """``n_domains`` contextual-SBM task sets per task kind, each with its own settings."""
    from ...datasets import make_graph_domains

    rng = np.random.default_rng(seed)
    task_sets = []
    for index in range(n_domains):
        for task in ("node", "edge", "graph"):
            settings = dict(n_classes=int(rng.integers(2, 9 if task != "edge" else 5)),
                            homophily=float(rng.uniform(0.4, 0.95)), noise=float(rng.uniform(0.5, 2.5)),
                            degree=float(rng.uniform(4, 16)), domain_shift=float(rng.uniform(0, 1)))
            domain = make_graph_domains(1, task=task, n_nodes=n_nodes, n_features=n_features, n_graphs=300,
                                        random_state=seed + 1000 + 3 * index + ("node", "edge", "graph").index(task),
                                        **settings)[0]
            if task == "graph":
                task_sets.append(TaskSet(domain.graphs, task="graph"))
            else:
                task_sets.append(TaskSet({"x": domain.x, "edge_index": domain.edge_index}, task=task))
    return task_sets


def molecule_task_set(n_molecules, seed):
    """QM9 pretraining molecules (``qm9_id % 10 != 0``) with their atoms as texts, as one graph task set."""
    from ...datasets import qm9_split

    pool, _ = qm9_split()
    pool = pool.sample(n=min(n_molecules, len(pool)), random_state=seed)
    graphs = smiles_to_graphs(list(pool["smiles"]))
    items = [{"edge_index": g["edge_index"], "num_nodes": g["num_nodes"], "text": atom_descriptions(g)}
             for g in graphs]
    return TaskSet(items, task="graph")


class _TaskSource:
    """Batches of task ids for the step loop, each task set weighed equally."""

    def __init__(self, set_sizes, batch_size, seed):
        sizes = torch.as_tensor(set_sizes, dtype=torch.float64)
        self.weights = torch.repeat_interleave(1.0 / sizes, torch.as_tensor(set_sizes))
        self.batch_size = batch_size
        self.generator = torch.Generator().manual_seed(seed)
        self.step = 0

    def sample(self):
        self.step += 1
        return torch.multinomial(self.weights, self.batch_size, replacement=True, generator=self.generator)

    def state_dict(self):
        return {"step": self.step, "generator": self.generator.get_state()}

    def load_state_dict(self, state):
        self.step = int(state["step"])
        self.generator.set_state(state["generator"])


def in_context_accuracy(model, task_graph, labels, shots=5, repeats=10, seed=0):
    """Mean accuracy of nearest-prototype prediction from ``shots`` random examples a class."""
    was_training = model.training
    model.eval()
    net = TaskTreeNet(model, task_graph, -1).eval()
    with torch.inference_mode():
        embeddings = torch.cat([net(torch.arange(s, min(s + 1024, task_graph.n_tasks)))
                                for s in range(0, task_graph.n_tasks, 1024)])
    model.train(was_training)
    rng = np.random.default_rng(seed)
    n_classes = int(labels.max()) + 1
    scores = []
    for _ in range(repeats):
        support = np.concatenate([rng.choice(np.flatnonzero(labels == c), shots, replace=False)
                                  for c in range(n_classes)])
        query = np.setdiff1d(np.arange(len(labels)), support)
        prototypes = class_prototypes(embeddings[support], labels[support], n_classes)
        predicted = prototype_logits(embeddings[query], prototypes).argmax(1).numpy()
        scores.append(float(np.mean(predicted == labels[query])))
    return float(np.mean(scores))


def _probe_domains(seed):
    from ...datasets import make_graph_domains

    domains = make_graph_domains(2, n_nodes=1000, n_features=FEATURE_DIM, noise=2.0, homophily=0.7,
                                 random_state=seed)
    out = []
    for domain in domains:
        read = read_task_sets([TaskSet({"x": domain.x, "edge_index": domain.edge_index})])
        out.append((build_task_graph(read, None), domain.target))
    return out


def build_parser():
    parser = argparse.ArgumentParser(prog="skicml pretrain git", description=__doc__.splitlines()[0])
    parser.add_argument("--sbm-domains", type=int, default=12, help="SBM domains of each task kind")
    parser.add_argument("--molecules", type=int, default=20000, help="QM9 molecules (0: none)")
    parser.add_argument("--hidden-dim", type=int, default=FEATURE_DIM)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.15)
    parser.add_argument("--fanout", type=int, default=10)
    parser.add_argument("--align-weight", type=float, default=0.0)
    parser.add_argument("--feature-mask-p", type=float, default=0.2)
    parser.add_argument("--edge-drop-p", type=float, default=0.2)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=1e-8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=500)
    return add_run_options(parser, "backbone")


def main(argv=None):
    args = build_parser().parse_args(argv)
    set_threads(args)  # before the task sets are made, not only for the run
    started = time.perf_counter()
    task_sets = sbm_task_sets(args.sbm_domains, args.seed)
    if args.molecules:
        task_sets.append(molecule_task_set(args.molecules, args.seed))
    read = read_task_sets(task_sets)
    texts = sorted({text for part in read for these in part.texts if these is not None for text in these})
    text_encoder = TfidfSVDTextEncoder(dim=FEATURE_DIM, random_state=args.seed).fit(texts) if texts else None
    sizes = [len(part.graphs) if part.task == "graph" else None for part in read]
    task_graph = build_task_graph(read, text_encoder)
    set_sizes = _set_sizes(read, task_graph.n_tasks, sizes)
    probes = _probe_domains(seed=50)
    if not args.quiet:
        print(f"{len(task_sets)} task sets, {task_graph.n_tasks} tasks, {task_graph.n_nodes} nodes read in "
              f"{time.perf_counter() - started:.0f} s", flush=True)

    def build_model(run):
        model = GITModel(FEATURE_DIM, args.hidden_dim, args.num_layers, "batch", args.dropout)
        objective = GITPretrainObjective(model, args.align_weight, 1.0, args.feature_mask_p, args.edge_drop_p)
        return TaskTreeNet(model, task_graph, args.fanout, objective=objective)

    def evaluate(net, step):
        return {"icl5_accuracy": float(np.mean([in_context_accuracy(net.model, graph, labels)
                                                for graph, labels in probes]))}

    def export(run):
        model = run.model.model.eval()
        provenance = recipe_provenance(
            run,
            data=(f"{args.sbm_domains} contextual-SBM domains each of node, edge and graph tasks "
                  f"(make_graph_domains, seeds {args.seed + 1000}+, {FEATURE_DIM} features)"
                  + (f"; {args.molecules} QM9 molecules (qm9_id % 10 != 0) with atom-description texts"
                     if args.molecules else "")),
            n_tasks=int(task_graph.n_tasks),
            objective="git (two views, stop-gradient predictor, alignment)",
            icl5_accuracy_held_out=[(m["step"], round(m["icl5_accuracy"], 4)) for m in run.history["metrics"]],
        )
        config = {"model": {"input_dim": FEATURE_DIM, "hidden_dim": args.hidden_dim, "num_layers": args.num_layers,
                            "norm": "batch", "dropout": args.dropout, "predictor_dropout": 0.5},
                  "feature_dim": FEATURE_DIM,
                  "text_encoder": text_encoder.get_state() if text_encoder is not None else None}
        digest = save_weights(args.export, model.state_dict(), config, provenance)
        print(f"wrote {args.export} (sha256 {digest})")

    run_recipe(
        args, argv, RECIPE_NAME, build_model=build_model,
        make_source=lambda run: _TaskSource(set_sizes, args.batch_size, args.seed), loss=_objective_loss,
        evaluate=evaluate, describe=lambda metrics: f"5-shot in-context accuracy {metrics['icl5_accuracy']:.4f}",
        export=export, weight_decay=args.weight_decay, warmup_fraction=0.05, grad_clip=1.0, checkpoint_every=250,
    )
    return 0


def _objective_loss(net, batch):
    """The loss of a batch of task ids: the objective's, which the network returns."""
    return net(batch)


def _set_sizes(read, n_tasks, graph_counts):
    """Tasks of each read task set, in order (they partition ``0..n_tasks``)."""
    sizes = []
    for part, count in zip(read, graph_counts):
        if part.task == "graph":
            sizes.append(count)
        elif part.index is not None:
            sizes.append(len(part.index))
        elif part.task == "node":
            sizes.append(part.graphs[0].num_nodes)
        else:
            sizes.append(part.graphs[0].edge_index.shape[1])
    if sum(sizes) != n_tasks:
        raise RuntimeError(f"task sets hold {sum(sizes)} tasks but the task graph {n_tasks}.")
    return sizes


if __name__ == "__main__":
    sys.exit(main())
