"""NeuralContexture against the exact spectrum (the paper's Table 2 metric).

For a kNN context on two offline datasets (sklearn digits, the first 1,000
rows, and breast cancer, all 569 rows, both standardised), the exact
eigenvalues ``s_i^2`` come from ContextureEmbedding; NeuralContexture trains
an MLP with each objective and estimates them by the post-hoc step of
appendix D. Printed per dataset and objective: the mean ``|lambda_hat_i -
s_i^2|`` over the top ``k`` (Table 2 style; the paper reports 0.09-0.18 on
its full datasets with a 20,000-wide network), the CCA alignment of the
neural and exact ``d``-dim embeddings, and the wall time.

Run (two threads, a few minutes)::

    OMP_NUM_THREADS=2 python benchmarks/bench_contexture_neural.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.preprocessing import StandardScaler

from skicml.contexture import ContextureEmbedding, KNNContext
from skicml.contexture._neural import NeuralContexture
from skicml.contexture.metrics import cca_alignment


def datasets():
    digits = load_digits().data[:1000]
    cancer = load_breast_cancer().data
    return {"digits (1000 x 64)": StandardScaler().fit_transform(digits),
            "breast_cancer (569 x 30)": StandardScaler().fit_transform(cancer)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-neighbors", type=int, default=30)
    parser.add_argument("--top-k", type=int, default=16, help="eigenvalues compared (Table 2: 256)")
    parser.add_argument("--n-components", type=int, default=8, help="d of the CCA alignment")
    parser.add_argument("--max-epochs", type=int, default=300)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    k, d = args.top_k, args.n_components
    print(f"kNN context K={args.n_neighbors}; MLP ({args.hidden},) tanh, n_outputs={4 * k}, full batch, "
          f"{args.max_epochs} epochs, lr 3e-3; {args.threads} threads")
    print(f"{'dataset':26s} {'objective':21s} {'MAE top-' + str(k):>11s} {'MAE top-' + str(d):>10s} "
          f"{'CCA d=' + str(d):>9s} {'time s':>7s}")
    for name, X in datasets().items():
        exact = ContextureEmbedding(KNNContext(n_neighbors=args.n_neighbors), n_components=k,
                                    max_components=4 * k).fit(X)
        for objective in ("untrained", "vicreg", "spectral_contrastive", "lowrank"):
            start = time.perf_counter()
            neural = NeuralContexture(
                KNNContext(n_neighbors=args.n_neighbors), n_components=k, n_outputs=4 * k,
                objective="lowrank" if objective == "untrained" else objective, hidden_sizes=(args.hidden,),
                max_epochs=0 if objective == "untrained" else args.max_epochs, batch_size=X.shape[0], lr=3e-3,
                random_state=0,
            ).fit(X)
            seconds = time.perf_counter() - start
            error = np.abs(neural.eigenvalues_[:k] - exact.eigenvalues_[:k])
            alignment = cca_alignment(neural.transform(X)[:, :d], exact.embedding_[:, :d])
            print(f"{name:26s} {objective:21s} {error.mean():11.3f} {error[:d].mean():10.3f} {alignment:9.3f} "
                  f"{seconds:7.1f}")
        print(f"{name:26s} exact s^2 top-{d}: {np.round(exact.eigenvalues_[:d], 3).tolist()}")


if __name__ == "__main__":
    main()
