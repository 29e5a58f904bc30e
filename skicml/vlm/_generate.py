"""Greedy, beam and nucleus decoding over any backbone of the VLM protocol.

One loop for every backbone: the backbone runs the prompt and then a token
a row; ``logits_fn`` turns the final-normed last hidden state into logits,
which is where VISTA's self-logits augmentation mixes in the early layers
(before any logits processing, as the official code does inside
``forward``). The repetition penalty and temperature act after it.
"""

from __future__ import annotations

import torch

__all__ = ["generate"]


def _penalize_repeats(logits, sequences, penalty):
    if penalty == 1.0 or sequences.shape[1] == 0:
        return logits
    seen = torch.gather(logits, 1, sequences)
    seen = torch.where(seen > 0, seen / penalty, seen * penalty)
    return logits.scatter(1, sequences, seen)


def _nucleus(logits, top_k, top_p):
    if top_k:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        ordered, order = logits.sort(descending=True)
        cumulative = ordered.softmax(-1).cumsum(-1)
        # Keep the smallest prefix whose mass reaches top_p (its last token included).
        drop = cumulative - ordered.softmax(-1) >= top_p
        logits = logits.masked_fill(drop.scatter(1, order, drop), float("-inf"))
    return logits


def generate(backbone, inputs, *, max_new_tokens, decoding="greedy", num_beams=5, top_p=0.9, top_k=0,
             temperature=1.0, repetition_penalty=1.0, length_penalty=1.0, logits_fn=None, generator=None):
    """Generated token ids, one list a row of ``inputs`` (the end token left out).

    Parameters
    ----------
    backbone : VLM backbone
    inputs : dict
        What ``backbone.build_inputs`` returned.
    max_new_tokens : int
    decoding : {"greedy", "beam", "nucleus"}, default="greedy"
    num_beams : int, default=5
        Beams a row in ``"beam"``; each row's beams are consecutive rows of
        the batch the backbone sees, so per-row hooks expand by
        ``repeat_interleave(num_beams)``.
    top_p, top_k, temperature : float, int, float
        Nucleus sampling; ``top_k=0`` keeps every token.
    repetition_penalty : float, default=1.0
        CTRL's penalty on tokens already generated (1 is none).
    length_penalty : float, default=1.0
        Beam scores are summed log-probabilities over ``length ** length_penalty``.
    logits_fn : callable or None, default=None
        ``logits_fn(hidden) -> logits``; by default ``backbone.lm_head``.
    generator : torch.Generator or None, default=None
        Seeds nucleus sampling.

    Returns
    -------
    list of list of int
    """
    logits_fn = backbone.lm_head if logits_fn is None else logits_fn
    hidden, state = backbone.prefill(inputs)
    n = hidden.shape[0]
    if max_new_tokens == 0:
        return [[] for _ in range(n)]
    if decoding == "beam":
        return _beam_search(backbone, hidden, state, n, max_new_tokens, num_beams, repetition_penalty,
                            length_penalty, logits_fn)
    eos = backbone.eos_token_id
    sequences = torch.zeros(n, 0, dtype=torch.long, device=hidden.device)
    done = torch.zeros(n, dtype=torch.bool, device=hidden.device)
    for step in range(max_new_tokens):
        logits = _penalize_repeats(logits_fn(hidden).float(), sequences, repetition_penalty)
        if decoding == "greedy":
            token = logits.argmax(-1)
        else:
            probabilities = _nucleus(logits / temperature, top_k, top_p).softmax(-1)
            token = torch.multinomial(probabilities, 1, generator=generator).squeeze(1)
        token = torch.where(done, torch.full_like(token, eos), token)
        sequences = torch.cat([sequences, token[:, None]], dim=1)
        done = done | (token == eos)
        if bool(done.all()) or step == max_new_tokens - 1:
            break
        hidden, state = backbone.step(token, state)
    return [_until_eos(row, eos) for row in sequences.tolist()]


def _until_eos(row, eos):
    return row[: row.index(eos)] if eos in row else row


def _beam_search(backbone, hidden, state, n, max_new_tokens, num_beams, repetition_penalty, length_penalty,
                 logits_fn):
    # Hugging Face's rule, so that one beam is greedy decoding: an end token
    # ends a hypothesis only when it ranks among the top num_beams candidates,
    # and a row is done once it holds num_beams finished hypotheses.
    eos, device = backbone.eos_token_id, hidden.device
    expand = torch.arange(n, device=device).repeat_interleave(num_beams)
    # The first logits come from the prompt's rows, before they are copied to
    # every beam: logits_fn may read per-row state captured at the prefill.
    first_logits = logits_fn(hidden)[expand]
    state = backbone.reorder(state, expand)
    scores = torch.full((n, num_beams), float("-inf"), device=device)
    scores[:, 0] = 0.0  # the beams start identical: only the first may extend at step one
    sequences = torch.zeros(n * num_beams, 0, dtype=torch.long, device=device)
    finished = [[] for _ in range(n)]
    done = [False] * n
    for step in range(max_new_tokens):
        logits = first_logits if step == 0 else logits_fn(hidden)
        log_probs = _penalize_repeats(logits.float(), sequences, repetition_penalty).log_softmax(-1)
        vocab = log_probs.shape[-1]
        candidates = (scores.reshape(-1, 1) + log_probs).reshape(n, num_beams * vocab)
        top_scores, top_index = candidates.topk(2 * num_beams, dim=1)
        beam_of, token_of = top_index // vocab, top_index % vocab
        next_scores = torch.full((n, num_beams), float("-inf"), device=device)
        next_rows = torch.zeros(n, num_beams, dtype=torch.long, device=device)
        next_tokens = torch.full((n, num_beams), eos, dtype=torch.long, device=device)
        for i in range(n):
            if done[i]:
                next_rows[i] = i * num_beams
                continue
            kept = 0
            for rank in range(2 * num_beams):
                score, beam, token = float(top_scores[i, rank]), int(beam_of[i, rank]), int(token_of[i, rank])
                if score == float("-inf"):
                    break
                row = i * num_beams + beam
                if token == eos:
                    if rank < num_beams:
                        length = sequences.shape[1] + 1
                        finished[i].append((score / length ** length_penalty, sequences[row].tolist()))
                    continue
                next_scores[i, kept], next_rows[i, kept], next_tokens[i, kept] = score, row, token
                kept += 1
                if kept == num_beams:
                    break
            done[i] = len(finished[i]) >= num_beams
        rows = next_rows.reshape(-1)
        sequences = torch.cat([sequences[rows], next_tokens.reshape(-1, 1)], dim=1)
        scores = next_scores
        if all(done) or step == max_new_tokens - 1:
            break
        state = backbone.reorder(state, rows)
        hidden, state = backbone.step(next_tokens.reshape(-1), state)
    results = []
    length = sequences.shape[1]
    for i in range(n):
        hypotheses = list(finished[i])
        if not done[i]:
            for b in range(num_beams):
                if scores[i, b] > float("-inf"):
                    hypotheses.append((float(scores[i, b]) / length ** length_penalty,
                                       sequences[i * num_beams + b].tolist()))
        best = max(hypotheses, key=lambda h: h[0])[1] if hypotheses else []
        results.append(_until_eos(best, eos))
    return results
