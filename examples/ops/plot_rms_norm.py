"""
===============================================
A custom op: ``skicml::rms_norm`` and its layer
===============================================

Every hot path of skicml is a ``torch.library`` custom op: a plain-torch
reference that runs everywhere, a Triton kernel that CUDA tensors dispatch
to, and registrations that let ``torch.export`` and ``torch.compile`` see the
op as one node. This example uses the RMS normalisation op that Llama-style
models in skicml are built from.
"""

# %%
# The op agrees with PyTorch's own ``rms_norm`` and has gradients.
import time

import matplotlib.pyplot as plt
import torch

from skicml.nn import RMSNorm
from skicml.ops import rms_norm

torch.manual_seed(0)
x = torch.randn(4, 64, requires_grad=True)
weight = torch.ones(64, requires_grad=True)
ours = rms_norm(x, weight, 1e-6)
builtin = torch.nn.functional.rms_norm(x, (64,), weight, eps=1e-6)
print("max difference to torch:", (ours - builtin).abs().max().item())
ours.sum().backward()
print("gradient shape:", tuple(x.grad.shape))

# %%
# As a layer, it shows up as a single node of an exported graph, which is what
# lets ``torch.compile`` keep the fused kernel.
layer = RMSNorm(64)
graph = torch.export.export(layer, (torch.randn(2, 64),)).graph
print([str(node.target) for node in graph.nodes if node.op == "call_function"])

# %%
# Time on this machine: on CPU the op runs its reference, so it costs what
# the reference costs plus a small dispatch overhead.
widths = [64, 256, 1024]
timings = {"skicml::rms_norm": [], "torch.nn.functional.rms_norm": []}
for width in widths:
    rows = torch.randn(4096, width)
    w = torch.ones(width)
    for name, fn in (
        ("skicml::rms_norm", lambda: rms_norm(rows, w, 1e-6)),
        ("torch.nn.functional.rms_norm", lambda: torch.nn.functional.rms_norm(rows, (width,), w, 1e-6)),
    ):
        fn()
        start = time.perf_counter()
        for _ in range(20):
            fn()
        timings[name].append((time.perf_counter() - start) / 20 * 1e3)

fig, ax = plt.subplots(figsize=(5, 3))
for name, values in timings.items():
    ax.plot(widths, values, marker="o", label=name)
ax.set_xscale("log", base=2)
ax.set_xlabel("row width")
ax.set_ylabel("ms per call (4096 rows)")
ax.legend()
fig.tight_layout()
plt.show()
