"""Speed of ``skicml::moe_dispatch`` against the ways a user would otherwise run a mixture of experts.

For each (N tokens, D width, E experts, k experts per token) of the spec and
three loads (the Expert Race selection of random scores, "balanced", and
selections skewed until the busiest expert takes about 1.5x and 4x the mean
load, as Expert Race does without its similarity loss), the forward of one
MoE layer (fp32, expert hidden 4D/k, tanh GELU), median of ``--repeats``
interleaved rounds:

- ``op``: :func:`skicml.ops.moe_dispatch` (on CPU the loop over experts:
  gather, two matmuls, gated scatter-add);
- ``dense``: every expert on every token, then the mask (what a user writes
  first; E/k times the FLOPs);
- ``padded``: the selected tokens of each expert gathered into an
  ``(E, max load, D)`` batch padded to the largest load, two ``bmm`` and a
  scatter-add (capacity-style batching, without dropping tokens).

``same`` is the largest difference of the baselines from the op. Then the
threshold of Expert Race over the N x E scores: ``torch.topk`` against
``kthvalue`` (what :func:`skicml.ops.kth_largest` runs on CPU). Then the
routing overhead of the whole layer: :class:`skicml.nn.ExpertRaceMoE`
(router, selection, dispatch and its auxiliary losses) with Expert Race,
token choice and expert choice, against the dense MLP of equal active
parameters (hidden ``4D``, what each token's k experts of hidden ``4D/k``
add up to), in microseconds per token for inference and for a training
step's forward and backward.

With CUDA (and not ``--skip-gpu``): the op's Triton grouped GEMM against
the loop, with the fraction of the device's fp32 matmul peak reached
(``--peak-tflops``, the H200's 67 by default); the threshold's Triton radix
select against ``kthvalue`` and ``topk`` on up to a million tokens; and the
whole-layer table on the GPU.

    OMP_NUM_THREADS=1 python benchmarks/bench_moe_dispatch.py [--threads 1] [--repeats 5] [--quick] [--skip-gpu]
"""

import argparse

import torch
import torch.nn.functional as F

from _common import median_times
from skicml.nn import ExpertRaceMoE
from skicml.nn.moe import race_threshold
from skicml.ops import moe_dispatch, moe_dispatch_reference

CONFIGS = [(2048, 64, 8, 2), (4096, 128, 16, 2), (4096, 128, 32, 4)]
QUICK_CONFIGS = [(256, 16, 4, 2)]
# (batch, tokens per sample, width, experts, k): Race-DiT on 8x8 digits, on 16x16, and a wider layer.
LAYER_CONFIGS = [(128, 16, 64, 8, 2), (64, 64, 128, 8, 2), (32, 64, 256, 16, 2)]
QUICK_LAYER_CONFIGS = [(8, 16, 16, 4, 2)]
ROUTINGS = ("expert_race", "token_choice", "expert_choice")


def selection(n_tokens, n_experts, k, skew, generator):
    """An Expert Race mask of k * N pairs whose busiest expert takes about ``skew`` times the mean load."""
    scores = torch.randn(n_tokens, n_experts, generator=generator)
    ramp = torch.linspace(-1.0, 1.0, n_experts)

    def mask_for(strength):
        shifted = scores + strength * ramp
        return shifted >= race_threshold(shifted, k)

    def max_over_mean(mask):
        load = mask.sum(0).double()
        return float(load.max() / load.mean())

    if skew is None:
        return mask_for(0.0)
    low, high = 0.0, 1.0
    while max_over_mean(mask_for(high)) < skew and high < 1e3:
        high *= 2
    for _ in range(30):
        middle = (low + high) / 2
        low, high = (middle, high) if max_over_mean(mask_for(middle)) < skew else (low, middle)
    return mask_for(high)


def dense_moe(x, mask, gates, w1, b1, w2, b2):
    hidden = F.gelu(torch.einsum("nd,edh->enh", x, w1) + b1[:, None], approximate="tanh")
    out = torch.einsum("enh,ehd->end", hidden, w2) + b2[:, None]
    return torch.einsum("ne,end->nd", gates * mask, out)


def padded_moe(x, mask, gates, w1, b1, w2, b2):
    n_experts = mask.shape[1]
    rows = [column.nonzero().squeeze(1) for column in mask.t()]
    capacity = max(1, max(len(r) for r in rows))
    index = torch.zeros(n_experts, capacity, dtype=torch.int64)
    valid = torch.zeros(n_experts, capacity, dtype=torch.bool)
    for e, r in enumerate(rows):
        index[e, :len(r)] = r
        valid[e, :len(r)] = True
    batch = x[index]  # (E, capacity, D)
    hidden = F.gelu(torch.baddbmm(b1[:, None], batch, w1), approximate="tanh")
    out = torch.baddbmm(b2[:, None], hidden, w2)
    weight = torch.where(valid, gates.t().gather(1, index), 0.0)
    return torch.zeros_like(x).index_add_(0, index.reshape(-1), (out * weight[..., None]).reshape(-1, x.shape[1]))


def layer(n_tokens, dim, n_experts, k, generator, device="cpu"):
    hidden = int(round(4 * dim / k))
    x = torch.randn(n_tokens, dim, generator=generator)
    gates = torch.randn(n_tokens, n_experts, generator=generator)
    w1 = torch.randn(n_experts, dim, hidden, generator=generator) / dim ** 0.5
    b1 = torch.randn(n_experts, hidden, generator=generator) * 0.1
    w2 = torch.randn(n_experts, hidden, dim, generator=generator) / hidden ** 0.5
    b2 = torch.randn(n_experts, dim, generator=generator) * 0.1
    return [t.to(device) for t in (x, gates, w1, b1, w2, b2)]


def cpu_table(configs, repeats):
    print(f"{'N':>6} {'D':>4} {'E':>3} {'k':>2} {'max/mean':>8} {'op ms':>8} {'dense ms':>9} {'padded ms':>10} "
          f"{'dense/op':>9} {'padded/op':>10} {'same':>9}")
    for n_tokens, dim, n_experts, k in configs:
        for skew in (None, 1.5, 4.0):
            generator = torch.Generator().manual_seed(0)
            x, gates, w1, b1, w2, b2 = layer(n_tokens, dim, n_experts, k, generator)
            mask = selection(n_tokens, n_experts, k, skew, generator)
            args = (x, mask, gates, w1, b1, w2, b2)
            with torch.no_grad():
                times = median_times({
                    "op": lambda: moe_dispatch(*args),
                    "dense": lambda: dense_moe(*args),
                    "padded": lambda: padded_moe(*args),
                }, repeats=repeats, warmup=1)
            (op_s, op_y), (dense_s, dense_y), (padded_s, padded_y) = times.values()
            same = max(float((dense_y - op_y).abs().max()), float((padded_y - op_y).abs().max()))
            load = mask.sum(0).double()
            print(f"{n_tokens:>6} {dim:>4} {n_experts:>3} {k:>2} {float(load.max() / load.mean()):>8.2f} "
                  f"{op_s * 1e3:>8.2f} {dense_s * 1e3:>9.2f} {padded_s * 1e3:>10.2f} {dense_s / op_s:>8.1f}x "
                  f"{padded_s / op_s:>9.1f}x {same:>9.1e}")


def threshold_table(configs, repeats):
    print(f"\n{'N':>6} {'E':>3} {'k':>2} {'topk ms':>8} {'kthvalue ms':>12} {'topk/kth':>9}")
    for n_tokens, _, n_experts, k in configs:
        scores = torch.randn(n_tokens, n_experts, generator=torch.Generator().manual_seed(0))
        keep = int(round(k * n_tokens))
        times = median_times({
            "topk": lambda: scores.reshape(-1).topk(keep, sorted=False).values.min(),
            "kthvalue": lambda: race_threshold(scores, k),
        }, repeats=repeats, warmup=1)
        (topk_s, topk_tau), (kth_s, kth_tau) = times.values()
        assert float(topk_tau) == float(kth_tau)
        print(f"{n_tokens:>6} {n_experts:>3} {k:>2} {topk_s * 1e3:>8.3f} {kth_s * 1e3:>12.3f} {topk_s / kth_s:>8.1f}x")


def layer_table(configs, repeats, device="cpu"):
    """Microseconds per token of the whole MoE layer against the dense MLP of equal active parameters."""
    where = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"\nwhole layer on {where}: microseconds per token, inference / training step (forward + backward);"
          " ratio = layer / dense MLP")
    print(f"{'B':>4} {'L':>4} {'D':>4} {'E':>3} {'k':>2} {'contender':>14} {'infer us':>9} {'ratio':>6} "
          f"{'train us':>9} {'ratio':>6}")
    for batch, length, dim, n_experts, k in configs:
        torch.manual_seed(0)
        x = torch.randn(batch, length, dim, device=device)
        layers = {"dense": torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(approximate="tanh"),
                                               torch.nn.Linear(4 * dim, dim))}
        for routing in ROUTINGS:
            layers[routing] = ExpertRaceMoE(dim, n_experts, k, routing=routing)
        layers = {name: module.to(device) for name, module in layers.items()}
        layers["expert_race"].train()(x)  # the inference threshold comes from a training batch

        def infer(module):
            module.eval()
            with torch.no_grad():
                out = module(x)
            return out[0] if isinstance(out, tuple) else out

        def train_step(module):
            module.train()
            out = module(x)
            out = out[0] if isinstance(out, tuple) else out
            out.square().mean().backward()
            return out

        calls = {}
        for name, module in layers.items():
            calls[f"{name}/infer"] = lambda module=module: infer(module)
            calls[f"{name}/train"] = lambda module=module: train_step(module)
        times = median_times(calls, repeats=repeats, warmup=1, device=device)
        per_token = {name: seconds * 1e6 / (batch * length) for name, (seconds, _) in times.items()}
        for name in layers:
            infer_us, train_us = per_token[f"{name}/infer"], per_token[f"{name}/train"]
            print(f"{batch:>4} {length:>4} {dim:>4} {n_experts:>3} {k:>2} {name:>14} {infer_us:>9.3f} "
                  f"{infer_us / per_token['dense/infer']:>5.2f}x {train_us:>9.3f} "
                  f"{train_us / per_token['dense/train']:>5.2f}x")


def gpu_threshold_table(repeats):
    """The race threshold on the GPU: the Triton radix select against kthvalue and topk."""
    from skicml.ops import kth_largest, kth_largest_reference

    print(f"\nCUDA ({torch.cuda.get_device_name()}): the K-th largest of N x E scores, K = k * N")
    print(f"{'N':>8} {'E':>3} {'k':>2} {'triton ms':>10} {'kthvalue ms':>12} {'topk ms':>8} {'kth/triton':>11} "
          f"{'topk/triton':>12}")
    for n_tokens, n_experts, k in ((32_768, 8, 2), (262_144, 16, 2), (1_048_576, 32, 4)):
        scores = torch.randn(n_tokens, n_experts, device="cuda", generator=torch.Generator("cuda").manual_seed(0))
        keep = k * n_tokens
        times = median_times({
            "triton": lambda: kth_largest(scores, keep),
            "kthvalue": lambda: kth_largest_reference(scores, keep),
            "topk": lambda: scores.reshape(-1).topk(keep, sorted=False).values.min(),
        }, repeats=repeats, warmup=3, device="cuda")
        (triton_s, triton_tau), (kth_s, kth_tau), (topk_s, _) = times.values()
        assert float(triton_tau) == float(kth_tau)
        print(f"{n_tokens:>8} {n_experts:>3} {k:>2} {triton_s * 1e3:>10.3f} {kth_s * 1e3:>12.3f} "
              f"{topk_s * 1e3:>8.3f} {kth_s / triton_s:>10.1f}x {topk_s / triton_s:>11.1f}x")


def gpu_table(configs, repeats, peak_tflops):
    print(f"\nCUDA ({torch.cuda.get_device_name()}): Triton grouped GEMM against the loop over experts")
    print(f"{'N':>6} {'D':>4} {'E':>3} {'k':>2} {'max/mean':>8} {'triton ms':>10} {'loop ms':>8} {'loop/triton':>11} "
          f"{'% peak':>7} {'max diff':>9}")
    for n_tokens, dim, n_experts, k in configs:
        for skew in (None, 4.0):
            generator = torch.Generator().manual_seed(0)
            x, gates, w1, b1, w2, b2 = layer(n_tokens, dim, n_experts, k, generator, "cuda")
            mask = selection(n_tokens, n_experts, k, skew, generator).cuda()
            args = (x, mask, gates, w1, b1, w2, b2)
            with torch.no_grad():
                times = median_times({"triton": lambda: moe_dispatch(*args),
                                      "loop": lambda: moe_dispatch_reference(*args)},
                                     repeats=repeats, warmup=3, device="cuda")
            (triton_s, triton_y), (loop_s, loop_y) = times.values()
            flops = 2 * 2 * int(mask.sum()) * dim * w1.shape[2]
            load = mask.sum(0).double()
            print(f"{n_tokens:>6} {dim:>4} {n_experts:>3} {k:>2} {float(load.max() / load.mean()):>8.2f} "
                  f"{triton_s * 1e3:>10.3f} {loop_s * 1e3:>8.3f} {loop_s / triton_s:>10.1f}x "
                  f"{100 * flops / triton_s / (peak_tflops * 1e12):>6.1f}% "
                  f"{float((triton_y - loop_y).abs().max()):>9.1e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one tiny configuration, for a smoke test")
    parser.add_argument("--skip-gpu", action="store_true")
    parser.add_argument("--peak-tflops", type=float, default=67.0, help="the device's fp32 matmul peak")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    configs = QUICK_CONFIGS if args.quick else CONFIGS
    layer_configs = QUICK_LAYER_CONFIGS if args.quick else LAYER_CONFIGS
    print(f"torch {torch.__version__}, {args.threads} thread(s), float32")
    cpu_table(configs, args.repeats)
    threshold_table(configs, args.repeats)
    layer_table(layer_configs, args.repeats)
    if torch.cuda.is_available() and not args.skip_gpu:
        gpu_table(configs, args.repeats, args.peak_tflops)
        gpu_threshold_table(args.repeats)
        layer_table(layer_configs, args.repeats, device="cuda")


if __name__ == "__main__":
    main()
