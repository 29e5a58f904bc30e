"""``skicml pretrain graphgpt``: SMTP-pretrain the shipped GraphGPT backbone on QM9.

The recipe behind ``skicml/graph/_graphgpt/_weights/``::

    skicml pretrain graphgpt --steps 3000 --threads 1 --checkpoint run/graphgpt.ckpt
    skicml pretrain graphgpt --steps 3000 --threads 1 --checkpoint run/graphgpt.ckpt --export graphgpt.pt

Molecules come from QM9 as shipped by the ``qm9pack`` package (read in place,
never downloaded). Every tenth molecule (``qm9_id % 10 == 0``) is held out
of pretraining: the GraphGPT benchmarks draw their train and test molecules
from that pool only. Each step draws a batch of molecules and serializes
each along a fresh random Eulerian walk, then masks a uniform 1-99% of the
tokens (scheduled masked-token prediction, the paper's objective). Training
resumes exactly from ``--checkpoint``; ``--max-minutes`` stops a run early
so that a later call continues it. Every ``--eval-every`` steps a ridge
probe of the HOMO-LUMO gap on frozen embeddings of held-out molecules
reports how useful the representation is, not only the masked-token loss.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from ..._weights import save_weights
from ...datasets import HARTREE_TO_EV, qm9_split
from ...utils.pretraining import add_run_options, final_loss, recipe_provenance, run_recipe, set_threads
from .._chem import smiles_to_graphs
from .._graphs import as_graph_list
from ._model import GraphGPTModel, MaskedTokenObjective
from ._tokenizer import EulerTokenizer, pad_sequences

__all__ = ["main", "probe_gap"]

#: ``skicml pretrain graphgpt`` (found by :func:`skicml.utils.discovery.all_pretrain_recipes`).
RECIPE_NAME = "graphgpt"


class _WalkSource:
    """Batches of freshly serialized molecules for the step loop."""

    def __init__(self, graphs, tokenizer, batch_size, seed):
        self.graphs = graphs
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.rng = np.random.default_rng(seed)
        self.step = 0

    def sample(self):
        chosen = self.rng.integers(0, len(self.graphs), self.batch_size)
        self.step += 1
        sequences = self.tokenizer._serialize([self.graphs[i] for i in chosen], view=self.step)
        return torch.from_numpy(pad_sequences(sequences))

    def state_dict(self):
        state = self.rng.bit_generator.state
        return {"step": self.step, "rng_state": int(state["state"]["state"]), "rng_inc": int(state["state"]["inc"]),
                "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"])}

    def load_state_dict(self, state):
        self.step = int(state["step"])
        self.rng.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": int(state["rng_state"]), "inc": int(state["rng_inc"])},
            "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"]),
        }


def _embed(model, tokenizer, graphs, batch_size=256):
    out = []
    with torch.inference_mode():
        for start in range(0, len(graphs), batch_size):
            tokens = torch.from_numpy(pad_sequences(tokenizer._serialize(graphs[start:start + batch_size])))
            out.append(model.pool(tokens, model(tokens), "mean").double().numpy())
    return np.concatenate(out)


def probe_gap(model, tokenizer, graphs, gap_hartree):
    """5-fold cross-validated MAE (eV) of a ridge probe of the gap on frozen
    mean-pooled embeddings."""
    from sklearn.linear_model import RidgeCV
    from sklearn.model_selection import cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    features = _embed(model, tokenizer, graphs)
    probe = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13)))
    predicted = cross_val_predict(probe, features, gap_hartree, cv=5)
    return float(np.mean(np.abs(predicted - gap_hartree)) * HARTREE_TO_EV)


def build_parser():
    parser = argparse.ArgumentParser(prog="skicml pretrain graphgpt", description=__doc__.splitlines()[0])
    parser.add_argument("--molecules", type=int, default=None, help="pretraining molecules (default: all)")
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--node-scope", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=6e-4)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=1000)
    parser.add_argument("--eval-molecules", type=int, default=2000)
    return add_run_options(parser, "backbone")


def main(argv=None):
    args = build_parser().parse_args(argv)
    set_threads(args)  # before the molecules are read, not only for the run
    started = time.perf_counter()
    pool, benchmark_pool = qm9_split()
    if args.molecules:
        pool = pool.sample(n=min(args.molecules, len(pool)), random_state=args.seed)
    graphs = as_graph_list(smiles_to_graphs(list(pool["smiles"])))
    probe_frame = benchmark_pool.sample(n=min(args.eval_molecules, len(benchmark_pool)), random_state=12345)
    probe_graphs = as_graph_list(smiles_to_graphs(list(probe_frame["smiles"])))
    probe_target = probe_frame["homo_lumo_gap"].to_numpy()
    if not args.quiet:
        print(f"{len(graphs)} pretraining molecules read in {time.perf_counter() - started:.0f} s", flush=True)

    tokenizer = EulerTokenizer(node_scope=args.node_scope, random_state=args.seed)._fit_graphs(graphs)
    backbone_config = dict(hidden_size=args.hidden_size, num_layers=args.num_layers, head_dim=args.head_dim,
                           mlp_ratio=4, attn_dropout=0.0, stack_agg="sum", causal=False)

    def build_model(run):
        return MaskedTokenObjective(GraphGPTModel(tokenizer.vocab_size_, tokenizer.n_stacked_, **backbone_config))

    def evaluate(objective, step):
        return {"probe_gap_mae_ev": probe_gap(objective.model, tokenizer, probe_graphs, probe_target)}

    def export(run):
        provenance = recipe_provenance(
            run, data="QM9 from qm9pack, molecules with qm9_id % 10 != 0", n_molecules=len(graphs), objective="smtp",
            final_loss=final_loss(run.history, window=200),
            probe_gap_mae_ev=[(m["step"], round(m["probe_gap_mae_ev"], 4)) for m in run.history["metrics"]],
        )
        config = {"backbone": backbone_config, "tokenizer": tokenizer.get_state()}
        digest = save_weights(args.export, run.model.model.state_dict(), config, provenance)
        print(f"wrote {args.export} (sha256 {digest})")

    run_recipe(
        args, argv, RECIPE_NAME, build_model=build_model,
        make_source=lambda run: _WalkSource(graphs, tokenizer, args.batch_size, args.seed), loss=_objective_loss,
        evaluate=evaluate, describe=lambda metrics: f"probe gap MAE {metrics['probe_gap_mae_ev']:.4f} eV",
        export=export, weight_decay=args.weight_decay, warmup_fraction=0.05, grad_clip=1.0, checkpoint_every=250,
    )
    return 0


def _objective_loss(objective, batch):
    """The masked-token loss of a batch of walks, which the objective returns."""
    return objective(batch)


if __name__ == "__main__":
    sys.exit(main())
