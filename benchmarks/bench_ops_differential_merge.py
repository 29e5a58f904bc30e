"""Time and memory of ``skicml::differential_merge`` (ViLAMP's feature merging).

Workload (spec section 8): N frames of M = 49 patches x D = 512, float32,
one query, K = 32 keyframes spread evenly over the video (frame 0 first); every
other frame is merged against its preceding keyframe, N - K output rows.
Three CPU routes compute the same tokens and weights:

- ``op``: :func:`skicml.ops.differential_merge`, chunked over rows (a chunk's
  patches stay in cache for all its passes; consecutive frames are a view,
  a shared keyframe is broadcast);
- ``naive``: :func:`skicml.ops.differential_merge_reference`, the unchunked
  multi-pass torch formula (gather, normalise, two cosines, softmax,
  weighted sum over whole (rows, M, D) tensors);
- ``loop``: a straightforward per-frame Python loop doing the same five
  steps on one (M, D) frame at a time.

Each (route, N) runs in a fresh subprocess so that its peak resident set
(``resource.getrusage``'s high-water mark) is its own; ``extra MB`` is that
peak minus the high-water mark before the first merge (interpreter, torch and
the 1 GB of inputs at N = 10,000 included in the baseline). Times are the
median of ``--repeats`` calls after a warm-up call. ``max diff`` is the
largest absolute difference of the tokens from the op's. ``naive`` is
skipped above ``--max-naive-gb`` (five copies of the gathered patches).

With CUDA, a second table times the Triton kernel (through the op) against
the reference on the GPU, and the kernel's bandwidth: the bytes it must move
(each distinct frame's patches read once, the tokens and scores written)
over its time, as a fraction of the device's copy bandwidth (a ``clone`` of
a tensor as large as the patches, read plus write).

    python benchmarks/bench_ops_differential_merge.py [--sizes 1000 10000] [--threads 2]
        [--repeats 5] [--max-naive-gb 8] [--gpu-shapes 10000 729 1152 bfloat16]
        [--skip-cpu] [--skip-gpu]
"""

import argparse
import json

from _common import measure_child, median_times, run_child

DEFAULT_SIZES = (1000, 10000)
N_KEYFRAMES = 32


def _data(n_frames, n_patches, dim, device="cpu", dtype=None, seed=0):
    """Patches, one query and the keyframe layout of the rows."""
    import torch

    dtype = dtype or torch.float32
    g = torch.Generator(device=device).manual_seed(seed)
    patches = torch.randn(n_frames, n_patches, dim, generator=g, device=device, dtype=dtype)
    queries = torch.randn(1, dim, generator=g, device=device, dtype=dtype)
    keyframes = torch.linspace(0, n_frames - 1, min(N_KEYFRAMES, n_frames), device=device).long()
    keyframes = keyframes.unique()
    is_key = torch.zeros(n_frames, dtype=torch.bool, device=device)
    is_key[keyframes] = True
    frame = torch.arange(n_frames, device=device)[~is_key]
    reference = keyframes[torch.searchsorted(keyframes, frame, right=True) - 1]
    query = torch.zeros_like(frame)
    return patches, queries, frame, reference, query


def per_frame_loop(patches, queries, frame_index, reference_index, query_index,
                   merge_lambda=1.0, temperature=0.01):
    """One frame at a time, as one writes it without batching."""
    import torch
    import torch.nn.functional as F

    tokens, weights = [], []
    for f, r, q in zip(frame_index.tolist(), reference_index.tolist(), query_index.tolist()):
        p = patches[f]
        unit = F.normalize(p, dim=-1)
        relevance = unit @ F.normalize(queries[q], dim=-1)
        redundancy = (unit * F.normalize(patches[r], dim=-1)).sum(dim=-1) if r >= 0 else 0.0
        w = torch.softmax((relevance - merge_lambda * redundancy) / temperature, dim=0)
        tokens.append(w @ p)
        weights.append(w)
    return torch.stack(tokens), torch.stack(weights)


def _route(name):
    from skicml.ops import differential_merge, differential_merge_reference

    return {"op": differential_merge, "naive": differential_merge_reference,
            "loop": per_frame_loop}[name]


def child(route, n, args):
    """Run one route at one size; print a JSON line with its measurements."""
    import torch

    torch.set_num_threads(args.threads)
    inputs = _data(n, args.patches, args.dim)
    fn = _route(route)
    (tokens, _), measured = measure_child(lambda: fn(*inputs), args.repeats,
                                          warmup=lambda: fn(*_data(40, args.patches, args.dim)))
    rows = torch.linspace(0, tokens.shape[0] - 1, min(tokens.shape[0], 64)).long()
    print(json.dumps({**measured, "rows": tokens.shape[0], "sample": tokens[rows].tolist()}))


def _spawn(route, n, args):
    return run_child(__file__, ["--child", route, str(n), "--patches", str(args.patches), "--dim", str(args.dim),
                                "--threads", str(args.threads), "--repeats", str(args.repeats)],
                     args.threads, f"{route} at n={n}")


def _max_diff(a, b):
    return max(abs(x - y) for row_a, row_b in zip(a, b) for x, y in zip(row_a, row_b))


def cpu_table(args):
    import torch

    print(f"differential_merge, CPU: M={args.patches}, D={args.dim}, float32, K={N_KEYFRAMES} "
          f"keyframes, rows = N - K, threads={args.threads}, torch={torch.__version__}")
    header = (f"{'N':>6} {'op s':>7} {'naive s':>8} {'loop s':>7} {'naive/op':>8} {'loop/op':>8} "
              f"{'op MB':>7} {'naive MB':>8} {'loop MB':>8} {'max diff':>9}")
    print(header)
    print("-" * len(header))
    skipped = []
    for n in args.sizes:
        op = _spawn("op", n, args)
        loop = _spawn("loop", n, args)
        naive_gb = 5 * n * args.patches * args.dim * 4 / 1e9
        naive = None
        if naive_gb > args.max_naive_gb:
            skipped.append((n, naive_gb))
        else:
            naive = _spawn("naive", n, args)
        diffs = [_max_diff(r["sample"], op["sample"]) for r in (loop, naive) if r is not None]

        def cell(result, key, fmt, width):
            return f"{'-':>{width}}" if result is None else f"{result[key]:{width}{fmt}}"

        naive_ratio = "-" if naive is None else f"{naive['seconds'] / op['seconds']:.1f}x"
        print(f"{n:>6} {op['seconds']:7.3f} {cell(naive, 'seconds', '.3f', 8)} "
              f"{loop['seconds']:7.3f} {naive_ratio:>8} {loop['seconds'] / op['seconds']:7.1f}x "
              f"{op['extra_mb']:7.0f} {cell(naive, 'extra_mb', '.0f', 8)} "
              f"{loop['extra_mb']:8.0f} {max(diffs):9.1e}", flush=True)
    print("ratios: route s / op s (above 1: the op is faster); MB: peak RSS above the inputs; "
          "max diff: largest |token - op token| of the other routes")
    for n, gb in skipped:
        print(f"naive skipped at N = {n}: it needs about {gb:.3g} GB > --max-naive-gb "
              f"{args.max_naive_gb:g}")


def gpu_table(args):
    import torch

    from skicml.ops import differential_merge, differential_merge_reference

    name = torch.cuda.get_device_name()
    print(f"\ndifferential_merge, CUDA ({name}): Triton kernel (through the op) vs the reference "
          f"on the GPU, K={N_KEYFRAMES} keyframes")
    header = (f"{'N':>6} {'M':>4} {'D':>5} {'dtype':>9} {'op ms':>8} {'ref ms':>8} {'ref/op':>7} "
              f"{'op GB/s':>8} {'copy GB/s':>9} {'fraction':>8} {'max diff':>9}")
    print(header)
    print("-" * len(header))
    shapes = [(n, args.patches, args.dim, torch.float32) for n in args.sizes]
    shapes += [(n, m, d, getattr(torch, dt)) for n, m, d, dt in args.gpu_shapes]
    for n, m, d, dtype in shapes:
        inputs = _data(n, m, d, device="cuda", dtype=dtype)
        rows = inputs[2].shape[0]
        size = inputs[0].element_size()
        # Each distinct frame read once (the keyframes stay in cache), outputs written.
        distinct = rows + inputs[3].unique().numel()
        moved = distinct * m * d * size + rows * (d * size + m * 4)
        copy_source = inputs[0]
        # The reference needs several (rows, M, D) float32 copies.
        ref_gb = 5 * rows * m * d * 4 / 1e9
        free = torch.cuda.mem_get_info()[0] / 1e9
        routes = {"op": lambda: differential_merge(*inputs),
                  "copy": lambda: copy_source.clone()}
        if ref_gb < 0.8 * free:
            routes["ref"] = lambda: differential_merge_reference(*inputs)
        timings = median_times(routes, repeats=args.repeats, device="cuda")
        t_op, (tokens, _) = timings["op"]
        t_copy = timings["copy"][0]
        bandwidth = moved / t_op / 1e9
        copy_bandwidth = 2 * copy_source.numel() * size / t_copy / 1e9
        if "ref" in timings:
            t_ref, (ref_tokens, _) = timings["ref"]
            diff = (tokens.float() - ref_tokens.float()).abs().max().item()
            ref_cells = f"{t_ref * 1e3:8.2f} {t_ref / t_op:6.1f}x"
        else:
            diff, ref_cells = float("nan"), f"{'-':>8} {'-':>7}"
        print(f"{n:>6} {m:>4} {d:>5} {str(dtype)[6:]:>9} {t_op * 1e3:8.2f} {ref_cells} "
              f"{bandwidth:8.0f} {copy_bandwidth:9.0f} {bandwidth / copy_bandwidth:8.2f} "
              f"{diff:9.1e}", flush=True)
        del inputs, routes, timings, tokens, copy_source
        torch.cuda.empty_cache()
    print("op GB/s: bytes the kernel must move (each distinct frame read once, tokens and "
          "scores written) / time; fraction: of the copy bandwidth (clone, read + write)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--patches", type=int, default=49)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-naive-gb", type=float, default=8.0)
    parser.add_argument("--gpu-shapes", nargs=4, action="append", default=[],
                        metavar=("N", "M", "D", "DTYPE"),
                        help="extra GPU workloads, e.g. 10000 729 1152 bfloat16 (spec section 8)")
    parser.add_argument("--skip-cpu", action="store_true")
    parser.add_argument("--skip-gpu", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("ROUTE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.gpu_shapes = [(int(n), int(m), int(d), dt) for n, m, d, dt in args.gpu_shapes]
    if args.child:
        child(args.child[0], int(args.child[1]), args)
        return
    if not args.skip_cpu:
        cpu_table(args)

    import torch

    if torch.cuda.is_available() and not args.skip_gpu:
        gpu_table(args)


if __name__ == "__main__":
    main()
