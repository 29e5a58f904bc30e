"""VISTA on a tiny random Hugging Face LLaVA: mechanics and cost per token against plain decoding.

The model is built offline from configs (4 Llama layers of width 64 behind
a 2-layer CLIP tower, 16 image tokens; the spec's benchmark size). Its
weights are random, so CHAIR means nothing here: what this measures is
that :class:`~skicml.vlm.HFLlavaAdapter` decodes as Hugging Face's own
``generate`` does, that VISTA at zero strength is plain decoding, and what
steering and self-logits augmentation cost per generated token on a model
whose layers are Hugging Face's, not ours.

Rows of the cost table, seconds per generated token at batch 1 and 16:
Hugging Face ``model.generate`` (greedy, the library baseline), our plain
decoding through the adapter, VSV only, SLA only, and VISTA (both).

    python benchmarks/bench_vlm_vista_llava.py           # the recorded run
    python benchmarks/bench_vlm_vista_llava.py --quick   # smoke test
"""

import argparse

import numpy as np
import torch
from _common import median_times

from skicml.datasets import make_object_scenes
from skicml.utils.images import pil_from_array
from skicml.vlm import HFLlavaAdapter, VISTASteerer, generate
from skicml.vlm._tiny_llava import TINY_LLAVA_TOKENS, tiny_random_llava

PROMPT = "<image> describe the image"
EOS, PAD = TINY_LLAVA_TOKENS["eos"], TINY_LLAVA_TOKENS["pad"]


def hf_generate(model, processor, images, max_new_tokens, **kwargs):
    batch = processor(images=[pil_from_array(i) for i in images], text=[PROMPT] * len(images), padding=True,
                      return_tensors="pt")
    with torch.inference_mode():
        out = model.generate(**batch, max_new_tokens=max_new_tokens, pad_token_id=PAD, eos_token_id=EOS,
                             **kwargs)
    rows = out[:, batch["input_ids"].shape[1]:].tolist()
    return [row[: row.index(EOS)] if EOS in row else row for row in rows]


def steerer(adapter, max_new_tokens, batch_size, **params):
    return VISTASteerer(backbone=adapter, prompt=PROMPT, max_new_tokens=max_new_tokens, batch_size=batch_size,
                        random_state=0, **params).fit()


def ids_of(model, images):
    return model._generate_ids(*model._read(images, reset=False))


def mechanics(model, processor, adapter, images, max_new_tokens):
    """Share of rows decoded identically: ours against HF generate, and VISTA at zero strength against plain."""
    rows = {}
    ours = steerer(adapter, max_new_tokens, len(images), vsv=False, sla=False)
    rows["plain greedy == HF generate greedy"] = (ids_of(ours, images),
                                                  hf_generate(model, processor, images, max_new_tokens))
    beam = steerer(adapter, max_new_tokens, len(images), vsv=False, sla=False, decoding="beam", num_beams=3)
    rows["plain beam(3) == HF generate beam(3)"] = (
        ids_of(beam, images),
        hf_generate(model, processor, images, max_new_tokens, num_beams=3, do_sample=False, length_penalty=1.0,
                    early_stopping=True))
    for decoding in ("greedy", "beam", "nucleus"):
        extra = dict(decoding=decoding, num_beams=3)
        rows[f"VISTA at zero strength == plain, {decoding}"] = (
            ids_of(steerer(adapter, max_new_tokens, len(images), vsv_lambda=0.0, sla_gamma=0.0, **extra), images),
            ids_of(steerer(adapter, max_new_tokens, len(images), vsv=False, sla=False, **extra), images))
    lengths = [len(r) for r in rows["plain greedy == HF generate greedy"][0]]
    print(f"mechanics on {len(images)} images, {max_new_tokens} new tokens (mean length {np.mean(lengths):.1f}):")
    for name, (a, b) in rows.items():
        same = np.mean([x == y for x, y in zip(a, b)])
        print(f"  {name:44s} {same:.0%} of rows identical")


def cost(model, processor, adapter, images, max_new_tokens, repeats):
    settings = {"plain": dict(vsv=False, sla=False), "vsv only": dict(sla=False), "sla only": dict(vsv=False),
                "vista": dict()}
    steerers = {name: steerer(adapter, max_new_tokens, len(images), vsv_lambda=0.1, sla_window=2, **params)
                for name, params in settings.items()}
    callables = {"HF generate": lambda: hf_generate(model, processor, images, max_new_tokens)}
    callables.update({name: (lambda m=m: ids_of(m, images)) for name, m in steerers.items()})
    timed = median_times(callables, repeats=repeats, warmup=1)
    per_token = {name: seconds / max(1, sum(len(row) for row in ids)) for name, (seconds, ids) in timed.items()}
    return per_token


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-images", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.n_images, args.max_new_tokens, args.repeats = 4, 8, 1
    torch.set_num_threads(args.threads)
    model, processor = tiny_random_llava(num_layers=args.layers, hidden_size=args.hidden)
    adapter = HFLlavaAdapter(model, processor)
    images = make_object_scenes(args.n_images, image_size=48, random_state=0)[0]
    print(f"tiny random LLaVA: {args.layers} layers, width {args.hidden}, "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {args.threads} thread(s)")
    mechanics(model, processor, adapter, images, args.max_new_tokens)
    for batch in sorted({1, args.n_images}):
        per_token = cost(model, processor, adapter, images[:batch], args.max_new_tokens, args.repeats)
        print(f"cost per generated token, batch {batch}: " + ", ".join(
            f"{name} {1e3 * s:.2f} ms ({s / per_token['plain']:.2f}x plain)" for name, s in per_token.items()))


if __name__ == "__main__":
    main()
