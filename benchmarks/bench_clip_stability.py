"""Numerical stability of the W-CLIP whitening: skicml against the official recipe.

Compares, on nearly singular covariances of L2-normalised synthetic
embeddings,

* ``skicml``: :class:`skicml.clip.WhiteningLikelihood` (float64, symmetric
  ``eigh``, eigenvalues floored at ``eps * max``, default ``eps=1e-12``), and
* ``official``: the recipe of the official Whitened-CLIP code as described
  in the spec (section 2.2), re-implemented here: ``torch.cov`` in float32,
  general ``torch.linalg.eig``, real parts kept, eigenvalues sorted
  descending, ``W = V diag(lambda**-0.5)`` with no floor and no truncation
  (negative eigenvalues give NaN columns), scoring in float32. The
  correlated-feature removal (spec 2.2 step 2) is off for both methods.

The reference is float64 ``scipy.linalg.eigh(driver="evr")`` of the float64
covariance with the same floor as skicml. Per case and method it prints:

* ``cond``: condition number of the float64 covariance (reference eigenvalues;
  ``inf`` when the smallest is <= 0),
* ``orth``: ``max |V^T V - I|`` of the eigenvectors,
* ``white``: ``max |W_r^T S W_r - I|`` on the retained subspace (the top ``r``
  directions, ``r`` = reference eigenvalues above the floor, ``S`` the float64
  covariance; NaN columns of ``W`` left out),
* ``cplx``/``neg``: eigenvalues with a non-zero imaginary part / negative real
  part (skicml: raw ``eigh`` eigenvalues before the floor),
* ``nanW``: NaN columns of ``W``; ``nanLL``: held-out rows with a NaN score,
* ``max|dLL|`` and ``rel``: max absolute and relative log-likelihood error
  against the reference over held-out rows (finite rows only),
* ``fit s``: wall time of the fit (mean, covariance, eigendecomposition, W).

    python benchmarks/bench_clip_stability.py [--quick] [--threads 2]
"""

import argparse
import math
import time
import warnings

import numpy as np
import scipy.linalg
import torch

from skicml.clip import WhiteningLikelihood

EPS = 1e-12
_LOG_2PI = math.log(2.0 * math.pi)
HEADER = (
    f"{'case':<18} {'method':<8} {'cond':>8} {'orth':>8} {'white':>8} {'cplx':>4} "
    f"{'neg':>4} {'nanW':>4} {'nanLL':>5} {'max|dLL|':>8} {'rel':>8} {'fit s':>6}"
)


def make_case(name, d, n_fit, n_test, seed, n_null=3, collinear=False):
    """L2-normalised embeddings with a spectrum decaying over 6 orders of magnitude."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    spectrum = np.logspace(0, -6, d)
    spectrum[-n_null:] = 1e-10  # a few near-zero directions (relative to the largest)
    mean = rng.standard_normal(d)
    mean -= q[:, -n_null:] @ (q[:, -n_null:].T @ mean)  # keep them near-null after normalising
    mean *= 3.0 / np.linalg.norm(mean)

    def sample(n):
        X = mean + (rng.standard_normal((n, d)) * np.sqrt(spectrum)) @ q.T
        if collinear:
            X[:, d - 1] = X[:, 0]  # exact duplicates
            X[:, d - 2] = X[:, 1]
            X[:, d - 3] = X[:, 2] + 1e-6 * rng.standard_normal(n)  # near-collinear
            X[:, d - 4] = X[:, 3] + 1e-5 * rng.standard_normal(n)
        return X / np.linalg.norm(X, axis=1, keepdims=True)

    return name, sample(n_fit), sample(n_test)


def cases(quick):
    if quick:
        return [
            make_case("d48 n200 decay", 48, 200, 50, 0),
            make_case("d48 n30 rankdef", 48, 30, 50, 1),
        ]
    return [
        make_case("d512 n2000 decay", 512, 2000, 500, 0),
        make_case("d768 n2000 decay", 768, 2000, 500, 1),
        make_case("d512 n400 rankdef", 512, 400, 500, 2),
        make_case("d768 n2000 dupcol", 768, 2000, 500, 3, collinear=True),
    ]


def reference(X, X_test):
    """float64 evr eigh of the float64 covariance, same floor as skicml."""
    mean = X.mean(axis=0)
    Xc = X - mean
    cov = Xc.T @ Xc / (X.shape[0] - 1)
    lam, V = scipy.linalg.eigh(cov, driver="evr")
    lam, V = lam[::-1], V[:, ::-1]
    cond = lam[0] / lam[-1] if lam[-1] > 0 else math.inf
    floor = EPS * lam[0]
    r = int(np.sum(lam > floor))
    W = V / np.sqrt(np.maximum(lam, floor))
    Z = (X_test - mean) @ W
    ll = -0.5 * (X.shape[1] * _LOG_2PI + np.einsum("ij,ij->i", Z, Z))
    return cov, cond, r, ll


def fit_skicml(X, X_test):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model = WhiteningLikelihood(eps=EPS).fit(X)
    seconds = time.perf_counter() - start
    # the raw eigenvalues the model saw before its floor (same covariance, same call)
    Xc = X - X.mean(axis=0)
    raw = np.linalg.eigh(Xc.T @ Xc / (X.shape[0] - 1))[0]
    return dict(
        V=model.components_,
        W=model.whitening_matrix_,
        n_complex=0,
        n_neg=int(np.sum(raw < 0)),
        ll=model.score_samples(X_test),
        seconds=seconds,
    )


def fit_official(X, X_test):
    """The official recipe in float32: torch.cov, general eig, W = V diag(lambda^-1/2)."""
    X32 = torch.from_numpy(X.astype(np.float32))
    start = time.perf_counter()
    mean = X32.mean(dim=0)
    cov = torch.cov((X32 - mean).T)
    lam_c, V_c = torch.linalg.eig(cov)
    lam, V = lam_c.real, V_c.real
    order = torch.argsort(lam, descending=True)
    lam, V = lam[order], V[:, order]
    W = V * lam.pow(-0.5)  # no epsilon: negative eigenvalues give NaN
    seconds = time.perf_counter() - start
    Z = (torch.from_numpy(X_test.astype(np.float32)) - mean) @ W
    ll = -0.5 * (X.shape[1] * _LOG_2PI + (Z * Z).sum(dim=1))
    return dict(
        V=V.double().numpy(),
        W=W.double().numpy(),
        n_complex=int((lam_c.imag != 0).sum()),
        n_neg=int((lam < 0).sum()),
        ll=ll.double().numpy(),
        seconds=seconds,
    )


def fmt(x):
    return "nan" if not np.isfinite(x) else f"{x:.1e}"


def row(name, method, cond, cov, r, ref_ll, out):
    V, W = out["V"], out["W"]
    orth = np.abs(V.T @ V - np.eye(V.shape[1])).max()
    Wr = W[:, :r]
    Wr = Wr[:, np.isfinite(Wr).all(axis=0)]  # NaN columns are counted in nanW
    white = np.abs(Wr.T @ cov @ Wr - np.eye(Wr.shape[1])).max() if Wr.size else math.nan
    nan_w = int(np.sum(~np.isfinite(W).all(axis=0)))
    ll = out["ll"]
    finite = np.isfinite(ll)
    err = np.abs(ll - ref_ll)[finite]
    max_err = err.max() if err.size else math.nan
    rel = (err / np.abs(ref_ll[finite])).max() if err.size else math.nan
    cond_s = "inf" if not np.isfinite(cond) else f"{cond:.1e}"
    return (
        f"{name:<18} {method:<8} {cond_s:>8} {fmt(orth):>8} {fmt(white):>8} {out['n_complex']:>4} "
        f"{out['n_neg']:>4} {nan_w:>4} {int(np.sum(~finite)):>5} {fmt(max_err):>8} {fmt(rel):>8} "
        f"{out['seconds']:>6.2f}"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run (seconds)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(
        f"threads={args.threads} torch={torch.__version__} numpy={np.__version__} "
        f"scipy={scipy.__version__} eps={EPS:g}"
    )
    print(HEADER)
    print("-" * len(HEADER))
    for name, X, X_test in cases(args.quick):
        cov, cond, r, ref_ll = reference(X, X_test)
        for method, fit in (("skicml", fit_skicml), ("official", fit_official)):
            print(row(name, method, cond, cov, r, ref_ll, fit(X, X_test)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
