"""Speed of ``skicml::ssd_scan`` (the Mamba-2 scan) against the naive recurrence.

Prints one table of forward+backward times (through autograd, as in
training) on CPU:

- ``sequential``: :func:`skicml.ops.ssd_scan_sequential`, a Python loop over
  time, timed once (it is slow);
- ``chunked``: the op, which on CPU runs its chunked plain-torch reference
  and its hand-written backward op, median of ``--repeats`` calls, at a few
  chunk sizes;

at the wearable spec's work unit (batch 64, T=168, H=8, P=64, N=64, about a
d=256 mixer) and at the CPU-default model size (batch 128, T=168, H=8, P=16,
N=16). "max |dy|" is the largest difference of the output from the
sequential one, "max |dgrad|" that of the six gradients, each relative to
the gradient's largest entry. Inputs are float32 with ``dt`` around 0.1 and
``A`` in [-16, -1], as a freshly initialised mixer makes them.

With CUDA, a second table compares the Triton kernel (forward) with the
reference on the GPU, and the op's forward+backward (Triton forward, plain-
torch backward), including the spec's GPU check at batch 256 (max abs diff
must stay below 1e-3 in float32). No library alternative runs on CPU;
``mamba_ssm`` (CUDA only) is not a dependency.

    python benchmarks/bench_ops_ssd_scan.py [--threads 2] [--repeats 5]
"""

import argparse
import functools

import torch
from _common import median_times

from skicml.ops import ssd_scan, ssd_scan_reference, ssd_scan_sequential

WORK_UNIT = (64, 168, 8, 64, 64)
CPU_DEFAULT = (128, 168, 8, 16, 16)


def make_inputs(batch, T, H, P, N, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, T, H, P, generator=g)
    dt = torch.nn.functional.softplus(torch.randn(batch, T, H, generator=g) - 2.0)
    A = -torch.empty(H).uniform_(1.0, 16.0, generator=g)
    B = torch.randn(batch, T, N, generator=g)
    C = torch.randn(batch, T, N, generator=g)
    D = torch.ones(H)
    grad_y = torch.randn(batch, T, H, P, generator=g)
    return [t.to(device) for t in (x, dt, A, B, C, D)], grad_y.to(device)


def forward_backward(fn, args, grad_y):
    inputs = [a.detach().requires_grad_(True) for a in args]
    y = fn(*inputs)
    return y.detach(), torch.autograd.grad(y, inputs, grad_y)


def differences(result, expected):
    (y, grads), (y_ref, grads_ref) = result, expected
    dy = (y - y_ref).abs().max().item()
    dgrad = max(
        ((g - r).abs().max() / r.abs().max().clamp_min(1e-30)).item()
        for g, r in zip(grads, grads_ref)
    )
    return dy, dgrad


def cpu_table(repeats, chunk_sizes):
    header = (f"{'batch,T,H,P,N':>18} {'implementation':>16} {'fwd+bwd s':>10} {'speed-up':>9} "
              f"{'max |dy|':>9} {'max |dgrad|':>11}")
    print(header)
    print("-" * len(header))
    for shape in (WORK_UNIT, CPU_DEFAULT):
        args, grad_y = make_inputs(*shape)
        name = ",".join(map(str, shape))
        # The sequential scan is slow enough to time once.
        t_seq, expected = median_times(
            {"sequential": lambda: forward_backward(ssd_scan_sequential, args, grad_y)}, repeats=1, warmup=0,
            device="cpu",
        )["sequential"]
        print(f"{name:>18} {'sequential':>16} {t_seq:10.3f} {1.0:8.2f}x {'-':>9} {'-':>11}")
        # Three warm-up rounds when repeating: the first calls of a process are
        # several times slower while the allocator maps fresh pages for the
        # large chunk intermediates.
        timings = median_times({
            chunk_size: functools.partial(forward_backward, functools.partial(ssd_scan, chunk_size=chunk_size),
                                          args, grad_y)
            for chunk_size in chunk_sizes
        }, repeats=repeats, warmup=3 if repeats > 1 else 0, device="cpu")
        for chunk_size, (t_op, result) in timings.items():
            dy, dgrad = differences(result, expected)
            label = f"chunked L={chunk_size}"
            print(f"{name:>18} {label:>16} {t_op:10.3f} {t_seq / t_op:8.1f}x {dy:9.1e} "
                  f"{dgrad:11.1e}")


def cuda_table(repeats, chunk_size):
    from skicml.ops._ssd_scan_triton import ssd_scan_triton

    header = (f"{'batch,T,H,P,N':>18} {'triton fwd ms':>13} {'ref fwd ms':>10} {'ratio':>7} "
              f"{'max |dy|':>9} {'op fwd+bwd ms':>13} {'ref fwd+bwd ms':>14}")
    print(header)
    print("-" * len(header))
    for shape in (CPU_DEFAULT, WORK_UNIT, (256,) + WORK_UNIT[1:]):
        args, grad_y = make_inputs(*shape, device="cuda")
        with torch.no_grad():
            forward = median_times({"triton": lambda: ssd_scan_triton(*args, chunk_size),
                                    "reference": lambda: ssd_scan_reference(*args, chunk_size)},
                                   repeats=repeats, device="cuda")
        (t_kernel, y_kernel), (t_ref, y_ref) = forward["triton"], forward["reference"]
        op = functools.partial(ssd_scan, chunk_size=chunk_size)
        reference = functools.partial(ssd_scan_reference, chunk_size=chunk_size)
        backward = median_times({"op": lambda: forward_backward(op, args, grad_y),
                                 "reference": lambda: forward_backward(reference, args, grad_y)},
                                repeats=repeats, device="cuda")
        t_op, t_ref_bwd = backward["op"][0], backward["reference"][0]
        dy = (y_kernel - y_ref).abs().max().item()
        name = ",".join(map(str, shape))
        print(f"{name:>18} {t_kernel * 1e3:13.3f} {t_ref * 1e3:10.3f} {t_ref / t_kernel:6.2f}x "
              f"{dy:9.1e} {t_op * 1e3:13.3f} {t_ref_bwd * 1e3:14.3f}")
        assert dy < 1e-3, f"Triton kernel differs from the reference by {dy:.2e} at {shape}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--chunk-sizes", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--skip-cpu", action="store_true", help="only the CUDA table")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads={args.threads} torch={torch.__version__} cuda={torch.cuda.is_available()}")
    if not args.skip_cpu:
        cpu_table(args.repeats, args.chunk_sizes)
    if torch.cuda.is_available():
        print()
        cuda_table(max(args.repeats, 20), 64)


if __name__ == "__main__":
    main()
