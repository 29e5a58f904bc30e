"""ContextureEmbedding's fit and transform time against SpectralEmbedding and KernelPCA.

At each size ``n`` (rows of an 8-feature ``make_classification`` problem),
every contender embeds the ``n`` rows in ``d = 16`` dimensions and, where it
can, 1,000 new rows:

- ``contexture``: :class:`~skicml.contexture.ContextureEmbedding` with a kNN
  context (K = 30) and its defaults otherwise (``max_components=512``,
  ``solver="auto"``): the call of issue 60, which took about 20 times
  SpectralEmbedding's time when ``fit`` solved 512 components;
- ``spectral``: :class:`~sklearn.manifold.SpectralEmbedding` with the same
  kNN affinity (K = 30); it has no ``transform``;
- ``kernel-pca``: :class:`~sklearn.decomposition.KernelPCA` with the RBF
  kernel (``gamma = 1 / (n_features * X.var())``) and
  ``eigen_solver="randomized"``, its fastest solver here; it needs the dense
  ``n x n`` kernel and is skipped above ``--max-dense-gb``.

Times are medians of interleaved rounds (``_common.median_times``), so that a
slow spell of a shared machine falls on every contender alike. The
``spectrum s`` column is the one-off time of the first read of ``tau_``
after a fit (the spectrum up to ``max_components = 512``, solved on demand
and cached), which ``fit`` no longer pays::

    OMP_NUM_THREADS=1 python benchmarks/bench_contexture_speed.py
    OMP_NUM_THREADS=1 python benchmarks/bench_contexture_speed.py --sizes 1000 4000 16000 64000
"""

import argparse
import datetime
import os
import platform
import time

import numpy as np
from _common import median_times, timed

N_COMPONENTS = 16
N_NEIGHBORS = 30
N_NEW = 1000
CONTENDERS = ["contexture", "spectral", "kernel-pca"]


def make_data(n, seed=0):
    from sklearn.datasets import make_classification

    X, _ = make_classification(n_samples=n + N_NEW, n_features=8, n_informative=6, n_redundant=1,
                               n_classes=4, random_state=seed)
    return X[:n], X[n:]


def make_model(name, X):
    from sklearn.decomposition import KernelPCA
    from sklearn.manifold import SpectralEmbedding

    from skicml.contexture import ContextureEmbedding, KNNContext

    if name == "contexture":
        return ContextureEmbedding(KNNContext(N_NEIGHBORS), n_components=N_COMPONENTS, random_state=0)
    if name == "spectral":
        return SpectralEmbedding(N_COMPONENTS, affinity="nearest_neighbors", n_neighbors=N_NEIGHBORS,
                                 random_state=0)
    return KernelPCA(N_COMPONENTS, kernel="rbf", gamma=1.0 / (X.shape[1] * X.var()), eigen_solver="randomized",
                     random_state=0)


def measure(n, contenders, repeats, warmup, spectrum):
    """``{name: {"fit": s, "transform": s or None, "spectrum": s or None}}`` at size ``n``."""
    X, X_new = make_data(n)
    models = {name: make_model(name, X) for name in contenders}
    fits = median_times({name: (lambda m=model: m.fit(X)) for name, model in models.items()},
                        repeats=repeats, warmup=warmup)
    embeds = {name: (lambda m=model: m.transform(X_new)) for name, model in models.items()
              if hasattr(model, "transform")}
    transforms = median_times(embeds, repeats=repeats, warmup=warmup) if embeds else {}
    out = {name: {"fit": fits[name][0], "transform": transforms[name][0] if name in transforms else None,
                  "spectrum": None} for name in models}
    if "contexture" in models:
        model = models["contexture"].fit(X)
        np.testing.assert_allclose(model.transform(X), model.embedding_, atol=1e-8)
        if spectrum:
            out["contexture"]["spectrum"], _ = timed(lambda: model.tau_)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 16000])
    parser.add_argument("--contenders", nargs="+", default=CONTENDERS, choices=CONTENDERS)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds up to 4,000 rows (1 beyond)")
    parser.add_argument("--max-dense-gb", type=float, default=2.5,
                        help="skip kernel-pca when its n x n float64 kernel needs more")
    parser.add_argument("--spectrum-max-rows", type=int, default=16000,
                        help="time the on-demand spectrum (tau_) up to this many rows")
    args = parser.parse_args(argv)

    now = datetime.datetime.now(datetime.timezone.utc)
    print(f"{now:%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    print(f"d = {N_COMPONENTS}, kNN K = {N_NEIGHBORS}, 8 features; transform = {N_NEW:,} new rows; "
          "median of interleaved rounds")
    header = (f"{'n':>6s} {'contender':11s} {'fit s':>8s} {'transform s':>12s} {'spectrum s':>11s} "
              f"{'fit / spectral':>15s}")
    print(header)
    print("-" * len(header))
    ratios = {}
    for n in args.sizes:
        contenders = [name for name in args.contenders
                      if not (name == "kernel-pca" and 8 * n * n / 1e9 > args.max_dense_gb)]
        big = n > 4000
        start = time.perf_counter()
        result = measure(n, contenders, repeats=1 if big else args.repeats, warmup=0 if big else 1,
                         spectrum=n <= args.spectrum_max_rows)
        spectral = result.get("spectral", {}).get("fit")
        for name in args.contenders:
            if name not in result:
                print(f"{n:6d} {name:11s} {'skipped':>8s}  (dense kernel {8 * n * n / 1e9:.1f} GB > "
                      f"--max-dense-gb {args.max_dense_gb:g})")
                continue
            row = result[name]
            transform = "none" if row["transform"] is None else f"{row['transform']:.3f}"
            spectrum = "" if row["spectrum"] is None else f"{row['spectrum']:.2f}"
            ratio = f"{row['fit'] / spectral:.2f}x" if spectral else ""
            print(f"{n:6d} {name:11s} {row['fit']:8.3f} {transform:>12s} {spectrum:>11s} {ratio:>15s}", flush=True)
        if spectral and "contexture" in result:
            ratios[n] = result["contexture"]["fit"] / spectral
        print(f"{'':6s} ({time.perf_counter() - start:.0f} s for this size)", flush=True)
    for n, ratio in ratios.items():
        verdict = "within" if ratio <= 1.5 else "NOT within"
        print(f"n = {n}: ContextureEmbedding fit / SpectralEmbedding fit = {ratio:.2f}x ({verdict} the 1.5x target)")
    return ratios


if __name__ == "__main__":
    main()
