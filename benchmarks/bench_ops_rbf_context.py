"""Time and memory of ``skicml::rbf_context_matmul`` against the dense kernel.

The product ``K v`` with ``K[i, k] = exp(-gamma |x_i - a_k|^2)`` (n = m rows
and anchors, p features, v of width d, float64), two ways:

- ``op``: :func:`skicml.ops.rbf_context_matmul`, which builds the kernel one
  tile at a time (memory O((n + m)(p + d)));
- ``dense``: what a user writes without it, the whole kernel then one matmul:
  ``torch.cdist(x, a).square_().mul_(-gamma).exp_() @ v`` (in place, so the
  kernel is the only n x m matrix alive; n = m = 20,000 needs 3.2 GB).

Each (route, size) runs in a fresh subprocess, so that its peak resident set
(``resource.getrusage``'s high-water mark) is its own. ``extra MB`` is that
peak minus the high-water mark just before the first product (interpreter,
torch and the inputs). Times are the median of ``--repeats`` products after
the first. The dense route is skipped above ``--max-dense-gb`` (the size of
its kernel), and the table says so. ``max rel diff`` compares 64 rows of the
two outputs. Ratios above 1 favour the op.

    python benchmarks/bench_ops_rbf_context.py [--sizes 2000 5000 10000 20000]
        [--p 16] [--d 64] [--n-masks 1] [--threads 2] [--repeats 3] [--max-dense-gb 2]
"""

import argparse
import json

from _common import measure_child, run_child

DEFAULT_SIZES = (2000, 5000, 10000, 20000)


def _data(n, p, d, n_masks, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, p, generator=g, dtype=torch.float64)
    anchors = torch.randn(n, p, generator=g, dtype=torch.float64)
    v = torch.randn(n, d, generator=g, dtype=torch.float64)
    masks = None
    if n_masks > 1:
        # The masked-RBF context's masks: 20 % of the features dropped.
        masks = torch.rand(n_masks, p, generator=g) >= 0.2
    return x, anchors, v, masks


def _dense(x, anchors, v, gamma, masks):
    import torch

    if masks is None:
        return torch.cdist(x, anchors).square_().mul_(-gamma).exp_() @ v
    total = None
    for keep in masks:
        kernel = torch.cdist(x[:, keep], anchors[:, keep]).square_().mul_(-gamma).exp_()
        total = kernel if total is None else total.add_(kernel)
        del kernel
    return total @ v


def child(route, n, args):
    """Run one route at one size; print a JSON line with its measurements."""
    import torch

    from skicml.ops import rbf_context_matmul

    torch.set_num_threads(args.threads)
    x, anchors, v, masks = _data(n, args.p, args.d, args.n_masks)
    gamma = 1.0 / args.p
    fn = rbf_context_matmul if route == "op" else _dense
    tiny = _data(8, args.p, args.d, args.n_masks)
    out, measured = measure_child(lambda: fn(x, anchors, v, gamma, masks), args.repeats,
                                  warmup=lambda: fn(*tiny[:3], gamma, tiny[3]))
    rows = torch.linspace(0, n - 1, min(n, 64)).long()
    print(json.dumps({**measured, "sample": out[rows].tolist()}))


def _spawn(route, n, args):
    return run_child(__file__, ["--child", route, str(n), "--p", str(args.p), "--d", str(args.d),
                                "--n-masks", str(args.n_masks), "--threads", str(args.threads),
                                "--repeats", str(args.repeats)],
                     args.threads, f"{route} at n={n}")


def _max_rel_diff(a, b):
    flat_a = [value for row in a for value in row]
    flat_b = [value for row in b for value in row]
    scale = max(max(abs(value) for value in flat_b), 1e-300)
    return max(abs(p - q) for p, q in zip(flat_a, flat_b)) / scale


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--p", type=int, default=16)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--n-masks", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-dense-gb", type=float, default=2.0)
    parser.add_argument("--child", nargs=2, metavar=("ROUTE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args)
        return

    import torch

    print(f"rbf_context_matmul vs dense kernel + matmul: n = m, p={args.p}, d={args.d}, "
          f"n_masks={args.n_masks}, float64, threads={args.threads}, torch={torch.__version__}")
    header = (f"{'n = m':>7} {'dense GB':>8} {'op s':>8} {'dense s':>8} {'speed':>7} "
              f"{'op MB':>7} {'dense MB':>8} {'memory':>7} {'op peak':>8} {'dense peak':>10} "
              f"{'max rel diff':>12}")
    print(header)
    print("-" * len(header))
    skipped = []
    for n in args.sizes:
        dense_gb = n * n * 8 / 1e9
        op = _spawn("op", n, args)
        line = f"{n:>7} {dense_gb:8.2f} {op['seconds']:8.3f} "
        if dense_gb > args.max_dense_gb:
            skipped.append((n, dense_gb))
            line += (f"{'-':>8} {'-':>7} {op['extra_mb']:7.0f} {'-':>8} {'-':>7} "
                     f"{op['peak_mb']:8.0f} {'-':>10} {'-':>12}")
        else:
            dense = _spawn("dense", n, args)
            speed = dense["seconds"] / op["seconds"]
            memory = max(dense["extra_mb"], 1e-3) / max(op["extra_mb"], 1e-3)
            line += (f"{dense['seconds']:8.3f} {speed:6.2f}x {op['extra_mb']:7.0f} "
                     f"{dense['extra_mb']:8.0f} {memory:6.1f}x {op['peak_mb']:8.0f} "
                     f"{dense['peak_mb']:10.0f} {_max_rel_diff(op['sample'], dense['sample']):12.1e}")
        print(line, flush=True)
    print("speed = dense s / op s; memory = dense MB / op MB (MB: peak RSS above the inputs; "
          "peak: whole process)")
    for n, gb in skipped:
        print(f"dense skipped at n = {n}: its kernel needs {gb:.3g} GB "
              f"> --max-dense-gb {args.max_dense_gb:g}")


if __name__ == "__main__":
    main()
