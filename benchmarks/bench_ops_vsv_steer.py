"""Speed of ``skicml::vsv_steer`` (VISTA's visual steering) against its eager formula.

Workloads (VISTA spec section 8): one decoding step of a 32-layer model,
i.e. 32 calls, one per layer, each with its own hidden states (B, 1, d) and
steering vectors (B, d), at B = 1 and 8 and d = 4096 (a 7B model) or 64 (a
tiny one); and one prefill of B = 1, T = 256, d = 4096 (32 calls too). Every
row times the ``mlp_output`` site with the adaptive gain (the official
code's setting) in float32, and on CUDA in float16 as well (the official
code runs fp16 models).

Routes:

- ``op``: :func:`skicml.ops.vsv_steer`, the public op (argument checks and
  the dispatcher included);
- ``ref``: :func:`skicml.ops.vsv_steer_reference`, the eager multi-kernel
  PyTorch formula (about six kernels a call);
- on CUDA, ``triton``: the Triton launcher called directly (no checks, no
  dispatcher).

``ref/op`` above 1 means the op is faster. On a CPU the op dispatches to the
reference, so the ratio there is the price of the checks and the dispatcher.
On CUDA the last columns give the kernel's bandwidth: the bytes it must move
(x read once, the output written, each sample's v read once) over its time,
as a fraction of the device's copy bandwidth (a ``clone`` of a 256 MiB
tensor, read plus write).

    python benchmarks/bench_ops_vsv_steer.py [--device cuda] [--threads 2] [--repeats 30]
        [--layers 32] [--quick]
"""

import argparse

import torch
from _common import median_times

from skicml.ops import vsv_steer, vsv_steer_reference

STRENGTH = 0.17
# (name, B, T, d)
WORKLOADS = (
    ("decode", 1, 1, 4096),
    ("decode", 8, 1, 4096),
    ("decode", 1, 1, 64),
    ("decode", 8, 1, 64),
    ("prefill", 1, 256, 4096),
)


def _inputs(layers, batch, seq_len, dim, device, dtype, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    xs = [torch.randn(batch, seq_len, dim, generator=g, device=device, dtype=dtype)
          for _ in range(layers)]
    vs = [torch.randn(batch, dim, generator=g, device=device, dtype=torch.float32)
          for _ in range(layers)]
    return xs, vs


def _all_layers(fn, xs, vs):
    """One call per layer, as a decoding step of the whole model makes them."""
    def run():
        return [fn(x, v, STRENGTH, "mlp_output", True) for x, v in zip(xs, vs)]
    return run


def _copy_bandwidth(device, repeats):
    source = torch.empty(2**26, device=device, dtype=torch.float32)
    t_copy = median_times({"copy": source.clone}, repeats=repeats, device=device)["copy"][0]
    return 2 * source.numel() * source.element_size() / t_copy / 1e9


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="5 repeats, for a smoke run")
    args = parser.parse_args(argv)
    repeats = 5 if args.quick else args.repeats
    torch.set_num_threads(args.threads)
    cuda = torch.device(args.device).type == "cuda"
    triton_kernel = None
    if cuda:
        from skicml.ops._vsv_steer_triton import vsv_steer_triton as triton_kernel
        copy_bw = _copy_bandwidth(args.device, repeats)
        print(f"device={torch.cuda.get_device_name()} torch={torch.__version__} "
              f"copy bandwidth {copy_bw:.0f} GB/s")
    else:
        print(f"device={args.device} threads={args.threads} torch={torch.__version__}")
    print(f"vsv_steer, site=mlp_output, adaptive, strength={STRENGTH}; times are for "
          f"{args.layers} calls (one per layer), median of {repeats}")
    header = (f"{'workload':>8} {'B':>2} {'T':>4} {'d':>5} {'dtype':>8} {'op ms':>8} {'ref ms':>8} "
              f"{'ref/op':>7}")
    if cuda:
        header += f" {'triton ms':>9} {'ref/tri':>7} {'GB/s':>6} {'fraction':>8}"
    header += f" {'max diff':>9}"
    print(header)
    print("-" * len(header))
    dtypes = (torch.float32, torch.float16) if cuda else (torch.float32,)
    for name, batch, seq_len, dim in WORKLOADS:
        for dtype in dtypes:
            xs, vs = _inputs(args.layers, batch, seq_len, dim, args.device, dtype)
            routes = {"op": _all_layers(vsv_steer, xs, vs),
                      "ref": _all_layers(vsv_steer_reference, xs, vs)}
            if triton_kernel is not None:
                routes["triton"] = _all_layers(triton_kernel, xs, vs)
            timings = median_times(routes, repeats=repeats, device=args.device)
            (t_op, out_op), (t_ref, out_ref) = timings["op"], timings["ref"]
            diff = max((a.float() - b.float()).abs().max().item() for a, b in zip(out_op, out_ref))
            line = (f"{name:>8} {batch:>2} {seq_len:>4} {dim:>5} {str(dtype)[6:]:>8} "
                    f"{t_op * 1e3:8.3f} {t_ref * 1e3:8.3f} {t_ref / t_op:6.2f}x")
            if triton_kernel is not None:
                t_tri = timings["triton"][0]
                moved = args.layers * (2 * batch * seq_len * dim * xs[0].element_size()
                                       + batch * dim * vs[0].element_size())
                bandwidth = moved / t_tri / 1e9
                line += (f" {t_tri * 1e3:9.3f} {t_ref / t_tri:6.2f}x {bandwidth:6.0f} "
                         f"{bandwidth / copy_bw:8.3f}")
            print(f"{line} {diff:9.1e}", flush=True)
    print("ref/op: reference time / op time (above 1: the op is faster); max diff: largest "
          "|op - ref| over the outputs")
    if cuda:
        print("GB/s: bytes the kernel must move (x read, output written, v read) / triton time; "
              "fraction: of the copy bandwidth")


if __name__ == "__main__":
    main()
