"""Exact contexture embeddings against SpectralEmbedding and KernelPCA: quality, time, memory.

At each size ``n`` (rows of a 16-feature, 8-class ``make_classification``
problem), every contender embeds the ``n`` rows in ``d = 32`` dimensions:

- ``contexture-knn``: :class:`~skicml.contexture.ContextureEmbedding` with a
  kNN context (K = 30), randomized SVD, ``max_components = d`` (what the
  alternatives compute);
- ``spectral``: :class:`~sklearn.manifold.SpectralEmbedding` with the same
  kNN affinity (fit only: it cannot embed new rows);
- ``contexture-rbf``: ``ContextureEmbedding`` with an RBF context (``gamma =
  "scale"``): dense up to 2**25 kernel entries, beyond through the tiled
  ``skicml::rbf_context_matmul`` op that never holds the kernel;
- ``kernel-pca``: :class:`~sklearn.decomposition.KernelPCA` with the RBF
  kernel of the same width and ``eigen_solver="randomized"`` (needs the dense
  ``n x n`` kernel: skipped above ``--max-dense-gb``).

Each fit runs in a fresh process, which reports its wall time and its peak
resident memory. Quality: a logistic-regression probe on 1,000 labelled rows
of the embedding, accuracy on 1,000 others (transductive for all, since
SpectralEmbedding has no ``transform``); for ``contexture-*`` also the time
to ``transform`` 1,000 new rows. At the smallest size, the leading
eigenvalues of the randomized kNN solve are compared with a dense
reference::

    python benchmarks/bench_contexture_spectrum.py
    python benchmarks/bench_contexture_spectrum.py --sizes 2000 5000
"""

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

CONTENDERS = ["contexture-knn", "spectral", "contexture-rbf", "kernel-pca"]
N_COMPONENTS = 32
N_NEIGHBORS = 30


def make_data(n, seed=0):
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n + 1000, n_features=16, n_informative=10, n_redundant=2,
                               n_classes=8, n_clusters_per_class=2, class_sep=1.5, random_state=seed)
    return X[:n], y[:n], X[n:]


def fit_one(name, n, threads):
    """Runs in a child process: fit one contender, print a JSON line."""
    import torch

    torch.set_num_threads(threads)
    X, y, X_new = make_data(n)
    result = {"name": name, "n": n}
    start = time.perf_counter()
    if name.startswith("contexture"):
        from skicml.contexture import ContextureEmbedding, KNNContext, RBFContext

        context = KNNContext(N_NEIGHBORS) if name == "contexture-knn" else RBFContext()
        model = ContextureEmbedding(context, n_components=N_COMPONENTS, max_components=N_COMPONENTS,
                                    solver="randomized", random_state=0)
        Z = model.fit_transform(X)
        result["fit_s"] = time.perf_counter() - start
        start = time.perf_counter()
        model.transform(X_new)
        result["transform_s"] = time.perf_counter() - start
        result["eigenvalues"] = model.eigenvalues_[:10].tolist()
    elif name == "spectral":
        from sklearn.manifold import SpectralEmbedding

        Z = SpectralEmbedding(n_components=N_COMPONENTS, affinity="nearest_neighbors", n_neighbors=N_NEIGHBORS,
                              random_state=0).fit_transform(X)
        result["fit_s"] = time.perf_counter() - start
    else:
        from sklearn.decomposition import KernelPCA

        from skicml.contexture._contexts import _resolve_gamma

        Z = KernelPCA(N_COMPONENTS, kernel="rbf", gamma=_resolve_gamma("scale", X), eigen_solver="randomized",
                      random_state=0).fit_transform(X)
        result["fit_s"] = time.perf_counter() - start
    result["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["accuracy"] = probe_accuracy(Z, y)
    print(json.dumps(result))


def probe_accuracy(Z, y):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    probe.fit(Z[:1000], y[:1000])
    return float(probe.score(Z[1000:2000], y[1000:2000]))


def dense_reference_gap(n):
    """Max |eigenvalue gap| of the randomized kNN solve against the dense SVD, top 32."""
    from skicml.contexture import ContextureEmbedding, KNNContext

    X, _, _ = make_data(n)
    values = {
        solver: ContextureEmbedding(KNNContext(N_NEIGHBORS), n_components=N_COMPONENTS, max_components=N_COMPONENTS,
                                    solver=solver, random_state=0).fit(X).eigenvalues_
        for solver in ("dense", "randomized")
    }
    return float(np.max(np.abs(values["dense"] - values["randomized"])))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 5000, 10000, 20000])
    parser.add_argument("--contenders", nargs="+", default=CONTENDERS, choices=CONTENDERS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-dense-gb", type=float, default=2.0,
                        help="skip kernel-pca when its n x n float64 kernel needs more")
    parser.add_argument("--child", nargs=2, metavar=("NAME", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        fit_one(args.child[0], int(args.child[1]), args.threads)
        return

    rows = []
    for n in args.sizes:
        for name in args.contenders:
            kernel_gb = 8 * n * n / 1e9
            if name == "kernel-pca" and kernel_gb > args.max_dense_gb:
                print(f"kernel-pca skipped at n = {n}: its dense kernel alone needs {kernel_gb:.1f} GB "
                      f"> --max-dense-gb {args.max_dense_gb:g}", flush=True)
                continue
            out = subprocess.run([sys.executable, __file__, "--child", name, str(n), "--threads", str(args.threads)],
                                 capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            rows.append(json.loads(out))
            print(f"n = {n:6d} {name:15s} fit {rows[-1]['fit_s']:7.2f} s  peak {rows[-1]['peak_mb']:7.0f} MB  "
                  f"probe accuracy {rows[-1]['accuracy']:.3f}", flush=True)

    print(f"\nd = {N_COMPONENTS}, kNN K = {N_NEIGHBORS}, {args.threads} threads; peak = resident memory of the "
          "fitting process")
    header = f"{'n':>6s} {'contender':15s} {'fit s':>8s} {'transform s':>12s} {'peak MB':>8s} {'accuracy':>9s}"
    print(header)
    print("-" * len(header))
    for row in rows:
        transform = f"{row['transform_s']:.2f}" if "transform_s" in row else "none"
        print(f"{row['n']:6d} {row['name']:15s} {row['fit_s']:8.2f} {transform:>12s} {row['peak_mb']:8.0f} "
              f"{row['accuracy']:9.3f}")
    by = {(row["n"], row["name"]): row for row in rows}
    for n in args.sizes:
        if (n, "contexture-knn") in by and (n, "spectral") in by:
            ratio = by[n, "contexture-knn"]["fit_s"] / by[n, "spectral"]["fit_s"]
            print(f"n = {n}: contexture-knn fit / SpectralEmbedding fit = {ratio:.2f}x (target <= 1.5x), "
                  f"and it also embeds new rows")
        if (n, "contexture-rbf") in by:
            peak = by[n, "contexture-rbf"]["peak_mb"]
            compared = (f"; KernelPCA {by[n, 'kernel-pca']['peak_mb']:.0f} MB (ratio "
                        f"{by[n, 'kernel-pca']['peak_mb'] / peak:.1f}x)") if (n, "kernel-pca") in by else ""
            print(f"n = {n}: contexture-rbf peak {peak:.0f} MB (target < 2000 MB at 20k){compared}")
    if args.sizes:
        n = min(args.sizes)
        print(f"n = {n}: randomized vs dense kNN eigenvalues, max |gap| over the top {N_COMPONENTS}: "
              f"{dense_reference_gap(n):.1e}")


if __name__ == "__main__":
    main()
