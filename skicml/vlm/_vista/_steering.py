"""VISTA's two mechanisms on any protocol backbone, with forward hooks only.

- Visual steering vectors (paper Eq. 4): the last-token residual stream of
  every layer for the prompt with its image, minus the same for the prompt
  without it, one vector per layer and sample.
- Steering (Eq. 5-6 / the official ``VSVLayer``): every decoding step adds
  a sample's vectors back, at each layer's MLP output or residual stream,
  with the norm restored (:func:`skicml.ops.vsv_steer`).
- Self-logits augmentation (Eq. 7-8): the final logits mixed with the mean
  logit-lens logits of a window of early layers. The LM head is linear and
  bias-free, so the mean of their logits is the logits of their mean: one
  vocabulary projection a step instead of ``window + 1``.
- The logit lens (Eq. 3), for the paper's analysis: where chosen tokens
  rank in every layer's vocabulary distribution at every step.

Hooks are registered on entering a context and removed on leaving it, also
when generation raises; modules are never replaced, so ``state_dict`` keys
never change.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

import torch

from ...ops import vsv_steer

__all__ = ["capture_last_states", "logit_lens_ranks", "self_logits", "steering", "steering_vectors"]


def _stream(output):
    return output[0] if isinstance(output, tuple) else output


@contextmanager
def _hooks(modules, make_hook):
    handles = [module.register_forward_hook(make_hook(k)) for k, module in enumerate(modules)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def capture_last_states(backbone, layers):
    """Collect the residual stream after each of ``layers`` at the last position of every forward call.

    Yields a dict ``{layer: (B, d) tensor}`` that each call overwrites.
    """
    states = {}

    def make_hook(k):
        index = layers[k]

        def hook(module, args, output):
            states[index] = _stream(output)[:, -1]

        return hook

    with _hooks([backbone.layers[i] for i in layers], make_hook):
        yield states


def _states_of(states, layers):
    """``states`` at ``layers``; a layer that did not run passes its input on: the last earlier one that did.

    A cross-attention layer (Mllama) is skipped by a forward without an
    image, so VISTA's negative context leaves it no state of its own; its
    output there is the residual stream it received.
    """
    out = []
    for i in layers:
        ran = [j for j in states if j <= i]
        if not ran:
            raise ValueError(f"no decoder layer up to {i} ran in the forward: cannot read its residual stream.")
        out.append(states[max(ran)].float())
    return torch.stack(out, dim=1)


def steering_vectors(backbone, images, prompts, layers):
    """Visual steering vectors (B, len(layers), d) in float32: with image minus without, last token."""
    every = list(range(max(layers) + 1))
    with capture_last_states(backbone, every) as states:
        backbone.prefill(backbone.build_inputs(images, prompts, with_image=True))
        positive = _states_of(states, layers)
        states.clear()
        backbone.prefill(backbone.build_inputs(images, prompts, with_image=False))
        negative = _states_of(states, layers)
    return positive - negative


@contextmanager
def steering(backbone, vectors, layers, strength, site="mlp_output", adaptive=True):
    """Steer ``layers`` with ``vectors`` (B, len(layers), d) while the context is open.

    A batch of ``k * B`` rows (beam search's beams, consecutive per sample)
    uses each sample's vectors ``k`` times.
    """
    if site == "mlp_output":
        modules = [backbone.mlp_of(backbone.layers[i]) for i in layers]
    else:
        modules = [backbone.layers[i] for i in layers]

    def make_hook(k):
        def hook(module, args, output):
            hidden = _stream(output)
            vector = vectors[:, k].to(hidden.device)
            if hidden.shape[0] != vector.shape[0]:
                vector = vector.repeat_interleave(hidden.shape[0] // vector.shape[0], dim=0)
            steered = vsv_steer(hidden, vector, strength, site=site, adaptive=adaptive)
            return (steered,) + tuple(output[1:]) if isinstance(output, tuple) else steered

        return hook

    with _hooks(modules, make_hook):
        yield


def self_logits(backbone, states, layers, gamma, final_norm=False):
    """``logits_fn`` of :func:`skicml.vlm.generate` that mixes in the early layers captured in ``states``.

    ``H((1 - gamma) * h_L + gamma * mean_l h_l)``: ``h_L`` is the
    final-normed last state, ``h_l`` the raw residual streams of ``layers``
    (normed first with ``final_norm=True``), ``H`` the LM head.
    """
    def logits_fn(hidden):
        early = torch.stack([states[i] for i in layers]).to(hidden.dtype)
        if final_norm:
            early = backbone.final_norm(early)
        return backbone.lm_head((1 - gamma) * hidden + gamma * early.mean(0))

    return logits_fn


def logit_lens_ranks(backbone, states, layers, token_ids):
    """Ranks (B, len(token_ids), len(layers)) of ``token_ids`` in each layer's logit lens, 1 the top.

    The lens of layer ``l`` is ``H(final_norm(h_l))`` at the last position,
    so the last layer's lens is the model's own (unaugmented) logits. Ties
    share the best rank.
    """
    hidden = torch.stack([states[i] for i in layers], dim=1)
    logits = backbone.lm_head(backbone.final_norm(hidden)).float()
    tracked = logits[..., token_ids]
    above = (logits[..., None, :] > tracked[..., None]).sum(-1)
    return (above + 1).transpose(1, 2)


@contextmanager
def vista(backbone, vectors, vsv_layers, strength, site, adaptive, sla_layers, gamma, final_norm):
    """Steering and self-logits augmentation together; yields the ``logits_fn`` (None without SLA)."""
    with ExitStack() as stack:
        if vectors is not None and strength > 0:
            stack.enter_context(steering(backbone, vectors, vsv_layers, strength, site, adaptive))
        logits_fn = None
        if sla_layers and gamma > 0:
            # Entered after the steering hooks, so the captured states are the steered ones.
            states = stack.enter_context(capture_last_states(backbone, sla_layers))
            logits_fn = self_logits(backbone, states, sla_layers, gamma, final_norm)
        yield logits_fn
