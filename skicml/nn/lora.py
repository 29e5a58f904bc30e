"""Low-rank adaptation (LoRA, Hu et al. 2022) of a model's linear layers, by forward hooks.

Used by one family: ``vlm`` (LavenderTuner).

:class:`LoRA` holds the adapters of the chosen ``nn.Linear`` submodules of
a model and leaves the model itself alone: :meth:`LoRA.attached` adds
``scaling * B(A(dropout(x)))`` to each target's output through forward
hooks for the length of a ``with`` block, so state-dict keys never change,
and :meth:`LoRA.merge` folds the adapters into the base weights, after which
nothing of them is left at inference. ``B`` starts at zero, so a fresh
adapter changes nothing. The adapters are float32 whatever the model's
dtype (a half-precision model's adapters would round their small updates
away): each reads its layer's input in float32 and adds its update in the
output's dtype.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch
from torch import nn

__all__ = ["LoRA"]


def _key(name):
    # ModuleDict keys may not hold dots.
    return name.replace(".", "__")


class LoRA(nn.Module):
    """Adapters ``W + (alpha / r) B A`` on the linear layers of ``model`` whose names end in ``targets``.

    Parameters
    ----------
    model : nn.Module
        The model to adapt; only read here, never changed until :meth:`merge`.
    targets : sequence of str
        Last components of the names of the ``nn.Linear`` submodules to adapt
        (``("q_proj", "v_proj")`` in a Hugging Face Llama; ``("qkv",)`` in
        :class:`~skicml.vlm.TinyVLM`).
    r : int, default=8
        Rank of the adapters.
    alpha : float, default=32
        Scale numerator: the update is ``alpha / r`` times ``B A``.
    dropout : float, default=0.05
        Dropout on the adapters' input, in training mode.

    Attributes
    ----------
    names : list of str
        The adapted submodules, in ``model.named_modules()`` order.
    scaling : float
        ``alpha / r``.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from skicml.nn.lora import LoRA
    >>> model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> lora = LoRA(model, targets=["2"], r=2)
    >>> lora.names
    ['2']
    >>> x = torch.randn(3, 4)
    >>> with lora.attached(model):
    ...     bool(torch.equal(model(x), nn.Sequential(*model)(x)))  # B = 0: no change yet
    True
    """

    def __init__(self, model, targets, r=8, alpha=32.0, dropout=0.05):
        super().__init__()
        targets = tuple(targets)
        self.names = [name for name, module in model.named_modules()
                      if isinstance(module, nn.Linear) and name.rsplit(".", 1)[-1] in targets]
        if not self.names:
            linear = sorted({name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, nn.Linear)})
            raise ValueError(f"no linear layer of the model is named like {list(targets)}; its linear layers "
                             f"are named {linear}.")
        if r < 1:
            raise ValueError(f"r must be a positive rank; got {r}.")
        self.r, self.alpha, self.scaling = int(r), float(alpha), float(alpha) / int(r)
        modules = dict(model.named_modules())
        self.down = nn.ModuleDict()
        self.up = nn.ModuleDict()
        for name in self.names:
            linear = modules[name]
            down = nn.Linear(linear.in_features, self.r, bias=False, device=linear.weight.device, dtype=torch.float32)
            nn.init.kaiming_uniform_(down.weight, a=math.sqrt(5))
            up = nn.Linear(self.r, linear.out_features, bias=False, device=linear.weight.device, dtype=torch.float32)
            nn.init.zeros_(up.weight)
            self.down[_key(name)], self.up[_key(name)] = down, up
        self.dropout = nn.Dropout(dropout)

    def delta(self, name, x):
        """The adapter's addition to the output of submodule ``name`` for its input ``x`` (float32)."""
        down = self.down[_key(name)]
        return self.up[_key(name)](down(self.dropout(x.to(down.weight.dtype)))) * self.scaling

    @contextmanager
    def attached(self, model):
        """Adapt ``model`` for the length of the block; the hooks are removed on leaving it, also on error."""
        modules = dict(model.named_modules())
        missing = [name for name in self.names if name not in modules]
        if missing:
            raise ValueError(f"the model has no submodules {missing}: these adapters were built for another one.")
        handles = []
        try:
            for name in self.names:
                def hook(module, inputs, output, name=name):
                    return output + self.delta(name, inputs[0]).to(output.dtype)

                handles.append(modules[name].register_forward_hook(hook))
            yield model
        finally:
            for handle in handles:
                handle.remove()

    @torch.no_grad()
    def merge(self, model):
        """Fold the adapters into ``model``'s weights, ``W += scaling * B A``; returns ``model``."""
        modules = dict(model.named_modules())
        for name in self.names:
            update = self.up[_key(name)].weight @ self.down[_key(name)].weight
            weight = modules[name].weight
            # Summed in float32, then rounded once to the weight's dtype.
            weight.copy_((weight.float() + update * self.scaling).to(weight.dtype))
        return model
