"""QM9 HOMO-LUMO gap: GraphGPT pretrained vs from scratch vs a chemist's baselines.

Molecules come from the benchmark pool of QM9 (``qm9_id % 10 == 0``), which
the shipped backbone never saw during pretraining. For each training size and
seed, every model trains on the same molecules and is scored on the same
held-out test molecules; MAE is in eV (1 Ha = 27.2114 eV). Contenders:

- ``graphgpt-pretrained``: :class:`GraphGPTRegressor` fine-tuned from the
  shipped SMTP-pretrained backbone ``graphgpt-qm9-small``;
- ``graphgpt-scratch``: the same network and schedule from random weights
  (does pretraining help, as the paper claims?);
- ``graphgpt-probe``: the shipped backbone frozen, its mean-pooled
  embedding (averaged over 4 serializations) standardized and read by
  ``RidgeCV`` (does fine-tuning beat a linear probe of the same backbone?);
- ``rf-morgan``: ``RandomForestRegressor`` on 2048-bit Morgan fingerprints
  (radius 2), what a chemist tries first;
- ``gine``: a 5-layer GINE (torch_geometric, hidden 128, atom and bond
  embeddings, mean pooling), the message-passing baseline;
- ``constant``: the training mean.

It also reports the share of GraphGPT's fit time spent serializing graphs.

    python benchmarks/bench_graph_qm9.py            # the recorded run
    python benchmarks/bench_graph_qm9.py --quick    # smoke test
    python benchmarks/bench_graph_qm9.py --models constant graphgpt-probe graphgpt-pretrained
"""

import argparse
import time
import warnings

import numpy as np
import pandas as pd
import torch
from _common import fit_predict_timed

from skicml.datasets import HARTREE_TO_EV, qm9_split
from skicml.graph import GraphGPTRegressor, as_graph_list, smiles_to_graphs


def morgan_fingerprints(smiles, n_bits=2048):
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=n_bits)
    return np.stack([generator.GetFingerprintAsNumPy(Chem.MolFromSmiles(s)) for s in smiles]).astype(np.float32)


def fit_rf(train, y_train, test, seed):
    from sklearn.ensemble import RandomForestRegressor

    start = time.perf_counter()
    X_train = morgan_fingerprints(train)
    model = RandomForestRegressor(n_estimators=300, min_samples_leaf=1, n_jobs=2, random_state=seed)
    model.fit(X_train, y_train)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    predicted = model.predict(morgan_fingerprints(test))
    return predicted, fit_seconds, time.perf_counter() - start


class GINE(torch.nn.Module):
    """5-layer GINE with summed per-column atom/bond embeddings and mean pooling; one output a target or class."""

    def __init__(self, atom_cardinalities, bond_cardinalities, hidden=128, layers=5, n_outputs=1):
        from torch_geometric.nn import GINEConv

        super().__init__()
        self.atom = torch.nn.ModuleList(torch.nn.Embedding(c, hidden) for c in atom_cardinalities)
        self.bond = torch.nn.ModuleList(
            torch.nn.ModuleList(torch.nn.Embedding(c, hidden) for c in bond_cardinalities) for _ in range(layers)
        )
        self.convs = torch.nn.ModuleList(
            GINEConv(torch.nn.Sequential(torch.nn.Linear(hidden, 2 * hidden), torch.nn.BatchNorm1d(2 * hidden),
                                         torch.nn.ReLU(), torch.nn.Linear(2 * hidden, hidden)))
            for _ in range(layers)
        )
        self.norms = torch.nn.ModuleList(torch.nn.BatchNorm1d(hidden) for _ in range(layers))
        self.head = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, n_outputs))

    def forward(self, data):
        from torch_geometric.nn import global_mean_pool

        h = sum(embed(data.x[:, j]) for j, embed in enumerate(self.atom))
        for conv, norm, bond in zip(self.convs, self.norms, self.bond):
            e = sum(embed(data.edge_attr[:, j]) for j, embed in enumerate(bond))
            h = h + torch.relu(norm(conv(h, data.edge_index, e)))
        out = self.head(global_mean_pool(h, data.batch))
        return out.squeeze(-1) if out.shape[-1] == 1 else out


def to_pyg(graph, target=0.0):
    """A molecule graph as a PyG ``Data`` with both edge directions and a target ``y``."""
    from torch_geometric.data import Data

    both = np.concatenate([graph.edge_index, graph.edge_index[::-1]], axis=1)
    attr = np.concatenate([graph.edge_attr, graph.edge_attr]).astype(np.int64)
    return Data(x=torch.as_tensor(graph.x, dtype=torch.long), edge_index=torch.as_tensor(both),
                edge_attr=torch.as_tensor(attr).reshape(-1, 3), y=torch.tensor([target]), num_nodes=graph.num_nodes)


def gine_for(graphs, n_outputs=1):
    """A :class:`GINE` whose embedding tables cover every atom and bond value in ``graphs``."""
    atom_card = [int(max(g.x[:, j].max() for g in graphs)) + 1 for j in range(9)]
    bond_card = [int(max(g.edge_attr[:, j].max() for g in graphs if g.n_edges)) + 1 for j in range(3)]
    return GINE(atom_card, bond_card, n_outputs=n_outputs)


def train_gine(model, loader, epochs, loss):
    """Fit ``model`` on ``loader`` for ``epochs`` passes (AdamW, one-cycle schedule), minimising ``loss``."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, 1e-3, total_steps=epochs * len(loader))
    model.train()
    for _ in range(epochs):
        for batch in loader:
            value = loss(model(batch), batch.y)
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
            schedule.step()
    return model.eval()


def fit_gine(train_graphs, y_train, test_graphs, seed, epochs):
    from torch_geometric.loader import DataLoader

    start = time.perf_counter()
    torch.manual_seed(seed)
    mean, scale = y_train.mean(), y_train.std()
    train = [to_pyg(g, float((t - mean) / scale)) for g, t in zip(train_graphs, y_train)]
    model = gine_for(train_graphs + test_graphs)
    train_gine(model, DataLoader(train, batch_size=64, shuffle=True), epochs, torch.nn.functional.l1_loss)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    with torch.no_grad():
        test = DataLoader([to_pyg(g) for g in test_graphs], batch_size=256)
        predicted = torch.cat([model(batch) for batch in test]).numpy() * scale + mean
    return predicted, fit_seconds, time.perf_counter() - start


def fit_graphgpt(train, y_train, test, seed, epochs, pretrained, size):
    model = GraphGPTRegressor(
        pretrained=pretrained, max_epochs=epochs, batch_size=64, lr=3e-4 if pretrained else 6e-4,
        weight_decay=0.02, warmup_fraction=0.1, n_views=4, random_state=seed, **size,
    )
    return (*fit_predict_timed(model, train, y_train, test), model)


def fit_probe(train, y_train, test, size):
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skicml.graph import GraphGPTEncoder

    model = make_pipeline(
        GraphGPTEncoder(pretrained="graphgpt-qm9-small", max_epochs=0, pooling="mean", n_views=4, batch_size=256,
                        random_state=0, **size),
        StandardScaler(),
        RidgeCV(alphas=np.logspace(-2, 4, 13)),
    )
    return fit_predict_timed(model, train, y_train, test)


def serialization_share(model, graphs, fit_seconds):
    start = time.perf_counter()
    model._tokens(as_graph_list(graphs))
    return (time.perf_counter() - start) / fit_seconds


MODELS = ["constant", "rf-morgan", "gine", "graphgpt-probe", "graphgpt-pretrained", "graphgpt-scratch"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=15, help="GraphGPT fine-tuning epochs at the largest size")
    parser.add_argument("--gine-epochs", type=int, default=60)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    parser.add_argument("--models", nargs="+", default=MODELS, choices=MODELS, help="contenders to run")
    args = parser.parse_args()
    size = {}
    if args.quick:
        args.n_train, args.n_test, args.seeds, args.epochs, args.gine_epochs = [60], 40, 1, 1, 1
        size = dict(hidden_size=16, num_layers=1, head_dim=8)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=UserWarning)

    _, pool = qm9_split()
    rows = []
    for seed in range(args.seeds):
        order = np.random.default_rng(seed).permutation(len(pool))
        test_frame = pool.iloc[order[: args.n_test]]
        test_smiles = list(test_frame["smiles"])
        y_test = test_frame["homo_lumo_gap"].to_numpy() * HARTREE_TO_EV
        test_graphs = as_graph_list(smiles_to_graphs(test_smiles))
        for n_train in args.n_train:
            train_frame = pool.iloc[order[args.n_test: args.n_test + n_train]]
            train_smiles = list(train_frame["smiles"])
            y_train = train_frame["homo_lumo_gap"].to_numpy() * HARTREE_TO_EV
            train_graphs = as_graph_list(smiles_to_graphs(train_smiles))
            # Equal optimiser steps at every size: small sets get more epochs.
            epochs = max(1, round(args.epochs * max(args.n_train) / n_train))

            def record(name, predicted, fit_s, predict_s, **extra):
                rows.append({"n_train": n_train, "seed": seed, "model": name,
                             "mae_ev": float(np.mean(np.abs(predicted - y_test))),
                             "fit_s": fit_s, "predict_s": predict_s, **extra})
                print(f"n_train={n_train} seed={seed} {name:22s} MAE {rows[-1]['mae_ev']:.4f} eV "
                      f"fit {fit_s:7.1f} s predict {predict_s:6.1f} s", flush=True)

            if "constant" in args.models:
                record("constant", np.full(len(y_test), y_train.mean()), 0.0, 0.0)
            if "rf-morgan" in args.models:
                record("rf-morgan", *fit_rf(train_smiles, y_train, test_smiles, seed))
            if "gine" in args.models:
                record("gine", *fit_gine(train_graphs, y_train, test_graphs, seed,
                                         max(1, round(args.gine_epochs * max(args.n_train) / n_train / 2))))
            if "graphgpt-probe" in args.models:
                # The shipped backbone's own size: a probe of a resized random network means nothing.
                record("graphgpt-probe", *fit_probe(train_graphs, y_train, test_graphs, {}))
            for name, pretrained in (("graphgpt-pretrained", "graphgpt-qm9-small"), ("graphgpt-scratch", None)):
                if name not in args.models:
                    continue
                predicted, fit_s, predict_s, model = fit_graphgpt(train_smiles, y_train, test_smiles, seed, epochs,
                                                                  pretrained, size)
                record(name, predicted, fit_s, predict_s, epochs=epochs,
                       serialization_share=serialization_share(model, train_graphs, fit_s))

    table = pd.DataFrame(rows)
    summary = table.groupby(["n_train", "model"], sort=False).agg(
        mae_ev=("mae_ev", "mean"), mae_sd=("mae_ev", "std"), fit_s=("fit_s", "mean"), predict_s=("predict_s", "mean"),
    )
    print()
    print(f"QM9 HOMO-LUMO gap, {args.n_test} test molecules, {args.seeds} seed(s), {args.threads} threads")
    print(summary.round(4).to_string())
    comparisons = [("graphgpt-scratch", "pretraining"), ("graphgpt-probe", "fine-tuning instead of a frozen probe"),
                   ("rf-morgan", "GraphGPT instead of the fingerprint forest"), ("gine", "GraphGPT instead of GINE")]
    for n_train in args.n_train:
        block = summary.loc[n_train, "mae_ev"]
        if "graphgpt-pretrained" not in block:
            continue
        for baseline, what in comparisons:
            if baseline in block:
                ratio = block["graphgpt-pretrained"] / block[baseline]
                print(f"n_train={n_train}: {what} changes the MAE by {100 * (ratio - 1):+.1f}% "
                      f"({block['graphgpt-pretrained']:.4f} vs {baseline} {block[baseline]:.4f} eV; ratio {ratio:.3f})")
    if "serialization_share" in table:
        share = table["serialization_share"].dropna()
        print(f"serialization (4 views, all training molecules) takes {100 * share.mean():.2f}% "
              "of GraphGPT's fit time")


if __name__ == "__main__":
    main()
