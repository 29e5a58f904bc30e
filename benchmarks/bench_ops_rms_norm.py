"""Speed of ``skicml::rms_norm`` against its reference and PyTorch's own op.

Prints one table of median times and ratios (higher = the op is faster). On
a CPU the op dispatches to its reference, so the ratio to the reference is
the dispatch overhead; on CUDA it runs the Triton kernel.

    python benchmarks/bench_ops_rms_norm.py [--device cuda] [--threads 2]
"""

import argparse

import torch
from _common import median_times

from skicml.ops import rms_norm, rms_norm_reference


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"device={args.device} threads={args.threads} torch={torch.__version__}")
    header = f"{'rows x width':>14} {'dtype':>9} {'op ms':>8} {'ref ms':>8} {'torch ms':>8} {'op/ref':>7} {'op/torch':>8}"
    print(header)
    print("-" * len(header))
    for rows, width in ((8192, 64), (8192, 512), (4096, 2048)):
        for dtype in (torch.float32,) + ((torch.bfloat16,) if args.device == "cuda" else ()):
            x = torch.randn(rows, width, device=args.device, dtype=dtype)
            w = torch.rand(width, device=args.device, dtype=dtype)
            timings = median_times({
                "op": lambda: rms_norm(x, w, 1e-6),
                "ref": lambda: rms_norm_reference(x, w, 1e-6),
                "torch": lambda: torch.nn.functional.rms_norm(x, (width,), w, 1e-6),
            }, repeats=args.repeats, device=args.device)
            t_op, t_ref, t_torch = (timings[name][0] for name in ("op", "ref", "torch"))
            print(f"{rows:>7} x {width:<5} {str(dtype)[6:]:>9} {t_op*1e3:8.3f} {t_ref*1e3:8.3f} "
                  f"{t_torch*1e3:8.3f} {t_ref/t_op:7.2f}x {t_torch/t_op:7.2f}x")


if __name__ == "__main__":
    main()
