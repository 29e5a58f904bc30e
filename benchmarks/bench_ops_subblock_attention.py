"""Lavender's text-to-image attention probabilities: eager attention against the log-sum-exp sub-block.

What one aligned layer costs a training step, forward and backward, for
the attention and the probabilities Lavender reads (the text queries'
attention to the image keys):

- ``eager``: the official route, ``output_attentions=True``: scores,
  softmax and ``P @ V`` over the whole ``(T, T)`` matrix, then the
  sub-block sliced out of ``P``;
- ``subblock``: the fused attention forward (``scaled_dot_product_attention``)
  for the output, plus :func:`skicml.ops.row_logsumexp` over the text rows
  only (``(n_text, T)``) and :func:`skicml.ops.subblock_attention_probs` for
  the ``(n_text, n_image)`` block.

Workloads: a LLaVA-1.5 layer (576 image tokens, 64 text tokens, 32 heads of
128; B = 1), a smaller self-attention VLM (256 image tokens, 32 text, 16
heads of 64; B = 4) and TinyVLM (9 image tokens, 70 text, 3 heads of 32;
B = 32). ``eager/subblock`` above 1 means the sub-block route is faster;
peak memory is the tensors the route keeps for the backward.

    python benchmarks/bench_ops_subblock_attention.py [--threads 1] [--repeats 5] [--device cpu]
"""

import argparse

import torch
import torch.nn.functional as F
from _common import median_times

from skicml.ops import row_logsumexp, subblock_attention_probs

# (name, B, heads, head_dim, n_image, n_text)
WORKLOADS = (
    ("llava-1.5 layer", 1, 32, 128, 576, 64),
    ("small VLM layer", 4, 16, 64, 256, 32),
    ("TinyVLM layer", 32, 3, 32, 9, 70),
)


def _inputs(batch, heads, dim, n_image, n_text, device):
    length = n_image + n_text
    g = torch.Generator(device=device).manual_seed(0)
    return [torch.randn(batch, heads, length, dim, generator=g, device=device, requires_grad=True)
            for _ in range(3)]


def eager(q, k, v, n_image):
    length, dim = q.shape[2], q.shape[3]
    causal = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
    probabilities = torch.softmax((q @ k.transpose(-1, -2) / dim ** 0.5).masked_fill(~causal, float("-inf")), -1)
    return probabilities @ v, probabilities[:, :, n_image:, :n_image]


def subblock(q, k, v, n_image):
    length, dim = q.shape[2], q.shape[3]
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    rows = slice(n_image, length)
    causal = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()[rows]
    lse = row_logsumexp(q[:, :, rows], k, dim ** -0.5, causal)
    return out, subblock_attention_probs(q[:, :, rows], k[:, :, :n_image], lse, dim ** -0.5)


def step(route, tensors, n_image):
    out, probabilities = route(*tensors, n_image)
    (out.square().mean() + probabilities.square().mean()).backward()
    for t in tensors:
        t.grad = None
    return probabilities.detach()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"device {args.device}, {torch.get_num_threads()} thread(s); forward + backward of one layer")
    print(f"{'workload':18s} {'B':>3s} {'H':>3s} {'D':>4s} {'img':>4s} {'txt':>4s} {'eager ms':>9s} "
          f"{'subblock ms':>11s} {'eager/subblock':>14s} {'max |dP|':>9s}")
    for name, batch, heads, dim, n_image, n_text in WORKLOADS:
        tensors = _inputs(batch, heads, dim, n_image, n_text, args.device)
        timed = median_times({"eager": lambda: step(eager, tensors, n_image),
                              "subblock": lambda: step(subblock, tensors, n_image)},
                             repeats=args.repeats, warmup=1, device=args.device)
        (t_eager, p_eager), (t_sub, p_sub) = timed["eager"], timed["subblock"]
        error = float((p_eager - p_sub).abs().max())
        print(f"{name:18s} {batch:3d} {heads:3d} {dim:4d} {n_image:4d} {n_text:4d} {1e3 * t_eager:9.2f} "
              f"{1e3 * t_sub:11.2f} {t_eager / t_sub:14.2f}x {error:9.1e}", flush=True)


if __name__ == "__main__":
    main()
