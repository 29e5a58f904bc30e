"""Race-DiT: a class-conditional pixel-space diffusion transformer whose MLPs are Expert Race MoE layers.

Yuan et al., *Expert Race: A Flexible Routing Strategy for Scaling Diffusion
Transformer with Mixture of Experts* (ICML 2025). The backbone is DiT:
patch tokens with fixed 2-D sine-cosine positions, a condition vector
``c = t_embed(t) + y_embed(y)``, adaLN-Zero blocks and a zero-initialised
output layer predicting the noise of every patch (DDPM, epsilon
prediction). Each block's MLP is an :class:`~skicml.nn.ExpertRaceMoE`
(or, with ``n_experts=0``, the dense MLP it replaces), whose router also
predicts the noise of each patch through a small head: the per-layer
regularization that keeps shallow routers learning under adaLN pre-norm.

The training objective, :meth:`RaceDiT.loss`::

    L = mse(eps_pred, eps) + sim_weight * sum_l L_sim,l + balance_weight * sum_l L_bal,l
        + plr_weight * mean_l mse(head_l(router_l), eps patches)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..nn import DDPMSchedule, DiTBlock, DiTFinalLayer, ExpertRaceMoE, LabelEmbedder, TimestepEmbedder
from ..nn.dit import patchify, sincos_position_embedding_2d, unpatchify

__all__ = ["RaceDiT"]


class RaceDiT(nn.Module):
    """The Race-DiT network with its DDPM schedule.

    Parameters
    ----------
    image_size : tuple of int, default=(8, 8)
        ``(H, W)``, multiples of ``patch_size``.
    in_channels : int, default=1
    patch_size : int, default=2
    hidden_dim : int, default=64
    depth : int, default=4
    n_heads : int, default=4
    n_classes : int, default=0
        0 for an unconditional model; otherwise labels ``0 .. n_classes-1``
        and a learned null label for classifier-free guidance.
    class_dropout : float, default=0.1
    n_experts : int, default=8
        0 replaces every MoE layer by the dense ``4 * hidden_dim`` MLP.
    top_k : float, default=2.0
    routing, gating, threshold_momentum, router_hidden
        As in :class:`~skicml.nn.ExpertRaceMoE`.
    per_layer_regularization : bool, default=True
        Give every router the head that predicts the noise patches.
    n_timesteps : int, default=200
    beta_schedule : {"linear", "cosine"}, default="linear"
    beta_start, beta_end : float, default=1e-4, 0.05

    Examples
    --------
    >>> import torch
    >>> from skicml.moe import RaceDiT
    >>> _ = torch.manual_seed(0)
    >>> model = RaceDiT(n_classes=10, hidden_dim=32, depth=2)
    >>> images, labels = torch.randn(4, 1, 8, 8), torch.tensor([0, 1, 2, 3])
    >>> loss, parts = model.loss(images, labels)
    >>> sorted(parts)
    ['balance', 'denoise', 'plr', 'sim']
    >>> eps, aux = model(images, torch.tensor([5, 5, 5, 5]), labels)
    >>> tuple(eps.shape), len(aux)
    ((4, 1, 8, 8), 2)
    """

    def __init__(self, image_size=(8, 8), in_channels=1, patch_size=2, hidden_dim=64, depth=4, n_heads=4,
                 n_classes=0, class_dropout=0.1, n_experts=8, top_k=2.0, routing="expert_race",
                 gating="identity", threshold_momentum=0.99, router_hidden=True, per_layer_regularization=True,
                 n_timesteps=200, beta_schedule="linear", beta_start=1e-4, beta_end=0.05):
        super().__init__()
        height, width = image_size
        if height % patch_size or width % patch_size:
            raise ValueError(f"image_size={tuple(image_size)} is not a multiple of patch_size={patch_size}.")
        self.image_size = (int(height), int(width))
        # What rebuilds this network from a weights file (skicml._weights.load_module).
        self.config = {
            "image_size": [int(height), int(width)], "in_channels": int(in_channels), "patch_size": int(patch_size),
            "hidden_dim": int(hidden_dim), "depth": int(depth), "n_heads": int(n_heads), "n_classes": int(n_classes),
            "class_dropout": float(class_dropout), "n_experts": int(n_experts), "top_k": float(top_k),
            "routing": routing, "gating": gating, "threshold_momentum": float(threshold_momentum),
            "router_hidden": bool(router_hidden), "per_layer_regularization": bool(per_layer_regularization),
            "n_timesteps": int(n_timesteps), "beta_schedule": beta_schedule, "beta_start": float(beta_start),
            "beta_end": float(beta_end),
        }
        self.in_channels, self.patch_size, self.n_classes = in_channels, patch_size, n_classes
        patch_dim = patch_size * patch_size * in_channels
        self.x_embedder = nn.Linear(patch_dim, hidden_dim)
        nn.init.xavier_uniform_(self.x_embedder.weight)
        nn.init.zeros_(self.x_embedder.bias)
        self.register_buffer("pos_embed", sincos_position_embedding_2d(
            hidden_dim, height // patch_size, width // patch_size)[None], persistent=False)
        self.t_embedder = TimestepEmbedder(hidden_dim)
        self.y_embedder = LabelEmbedder(n_classes, hidden_dim, class_dropout) if n_classes else None

        def mlp():
            if not n_experts:
                return None
            return ExpertRaceMoE(hidden_dim, n_experts, top_k, routing=routing, gating=gating,
                                 router_hidden=router_hidden, threshold_momentum=threshold_momentum,
                                 target_dim=patch_dim if per_layer_regularization else None)

        self.blocks = nn.ModuleList(DiTBlock(hidden_dim, n_heads, mlp=mlp()) for _ in range(depth))
        self.final_layer = DiTFinalLayer(hidden_dim, patch_size, in_channels)
        self.schedule = DDPMSchedule(n_timesteps, beta_schedule, beta_start, beta_end)

    @property
    def moe_layers(self):
        """The blocks' :class:`~skicml.nn.ExpertRaceMoE` layers, shallow first."""
        return [block.mlp for block in self.blocks if isinstance(block.mlp, ExpertRaceMoE)]

    def condition(self, t, labels=None, drop=None):
        c = self.t_embedder(t)
        if self.y_embedder is not None:
            if labels is None:
                labels = torch.full_like(t, self.n_classes, dtype=torch.int64)
            c = c + self.y_embedder(labels, drop=drop)
        return c

    def forward(self, x, t, labels=None, drop=None):
        """Noise prediction ``(B, C, H, W)`` for noised images ``x`` at timesteps ``t``, and each block's aux."""
        tokens = self.x_embedder(patchify(x, self.patch_size)) + self.pos_embed.to(x.dtype)
        c = self.condition(t, labels, drop)
        aux = []
        for block in self.blocks:
            tokens, block_aux = block(tokens, c)
            aux.append(block_aux)
        patches = self.final_layer(tokens, c)
        return unpatchify(patches, self.patch_size, self.in_channels, self.image_size), aux

    def loss(self, images, labels=None, *, sim_weight=1e-2, balance_weight=0.0, plr_weight=0.1, t=None,
             noise=None):
        """The training loss of a batch of clean images in [-1, 1], and its parts (detached floats).

        ``t`` and ``noise`` default to fresh draws from the global generator.
        """
        if t is None:
            t = torch.randint(0, self.schedule.n_timesteps, (len(images),), device=images.device)
        if noise is None:
            noise = torch.randn_like(images)
        eps, aux = self(self.schedule.add_noise(images, noise, t), t, labels)
        denoise = F.mse_loss(eps, noise)
        moe = [a for a in aux if a]
        zero = denoise.new_zeros(())
        sim = sum((a["sim_loss"] for a in moe), zero)
        balance = sum((a["balance_loss"] for a in moe), zero)
        with_heads = [a["plr_pred"] for a in moe if a["plr_pred"] is not None]
        target = patchify(noise, self.patch_size)
        plr = sum((F.mse_loss(p, target) for p in with_heads), zero) / max(len(with_heads), 1)
        total = denoise + sim_weight * sim + balance_weight * balance + plr_weight * plr
        parts = {"denoise": denoise, "sim": sim, "balance": balance, "plr": plr}
        return total, {name: float(value.detach()) for name, value in parts.items()}

    @torch.no_grad()
    def sample(self, n_samples, labels=None, *, guidance_scale=1.0, n_steps=None, eta=1.0, generator=None):
        """Images ``(n_samples, C, H, W)`` in [-1, 1] by DDPM/DDIM sampling, with classifier-free guidance.

        ``guidance_scale`` 1 is plain conditional sampling; above 1 the
        conditional prediction is pushed away from the unconditional one.
        """
        device = self.pos_embed.device
        if labels is not None:
            labels = torch.as_tensor(labels, device=device, dtype=torch.int64)

        def eps_fn(x, t):
            if labels is None or guidance_scale == 1.0:
                return self(x, t, labels)[0]
            both = torch.cat([x, x])
            drop = torch.cat([torch.zeros_like(labels, dtype=torch.bool), torch.ones_like(labels, dtype=torch.bool)])
            conditional, unconditional = self(both, torch.cat([t, t]), torch.cat([labels, labels]), drop)[0].chunk(2)
            return unconditional + guidance_scale * (conditional - unconditional)

        shape = (n_samples, self.in_channels, *self.image_size)
        dtype = self.x_embedder.weight.dtype
        return self.schedule.sample(eps_fn, shape, n_steps=n_steps, eta=eta, clip=1.0, generator=generator,
                                    device=device, dtype=dtype)
