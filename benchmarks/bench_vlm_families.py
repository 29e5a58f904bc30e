"""VISTA and Lavender on every Hugging Face VLM family skicml adapts: mechanics and cost per family.

Tiny random models of each family built offline from configs
(:func:`skicml.vlm._tiny_families.tiny_random_vlm`: a 3-layer decoder of width
32, 4 heads over 2 key-value heads, behind a 2-layer vision tower; Mllama
has 4 layers, two of them cross-attention), driven through
``as_backbone(model, processor)``. The weights are random, so only
mechanics and cost mean anything here.

Per family:

- mechanics: the share of rows whose greedy tokens through the adapter equal
  ``model.generate``'s, and VISTA at zero strength against plain decoding;
- VISTA's cost per generated token at batch 1 and 16: ``model.generate``
  (greedy), plain decoding through the adapter, and VISTA (steering vectors
  at every layer it steers, ``vsv_lambda=0.1``, plus self-logits
  augmentation over ``sla_window=1``), the steering vectors' two prefill
  passes included; every row runs the full ``--max-new-tokens`` (the end
  token is never chosen), so all contenders decode the same lengths;
- Lavender's training step (forward, backward, AdamW; LoRA rank 8 on
  ``q_proj`` and ``v_proj``; 8 scene captions): ``plain`` (captions only),
  ``lavender`` (the alignment loss through the Aligner, the attention read by
  the tuner's hooks while the model keeps SDPA) and ``lavender-eager`` (the
  same loss with the model switched to eager attention and the maps sliced
  from its full probabilities, the official route), with the megabytes
  autograd saves for the backward pass.

The contenders of each table are timed interleaved (:func:`_common.median_times`).

    python benchmarks/bench_vlm_families.py            # the recorded run
    python benchmarks/bench_vlm_families.py --quick    # smoke test
"""

import argparse
import copy

import numpy as np
import torch
from _common import median_times

from skicml.datasets import make_object_scenes
from skicml.utils.images import pil_from_array
from skicml.vlm import LavenderTuner, OracleMaskTeacher, VISTASteerer, as_backbone, generate
from skicml.vlm._tiny_families import FAMILIES, FAMILY_PROMPTS, tiny_random_vlm

NESTED = {"mllama", "idefics3", "smolvlm"}


def hf_generate(model, processor, adapter, family, images, max_new_tokens, **kwargs):
    pictures = [pil_from_array(i) for i in images]
    batch = processor(images=[[p] for p in pictures] if family in NESTED else pictures,
                      text=[FAMILY_PROMPTS[family]] * len(images), padding=True, return_tensors="pt")
    batch.pop("token_type_ids", None)
    eos = adapter.eos_token_id
    with torch.inference_mode():
        out = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos,
                             pad_token_id=0, **kwargs)
    rows = out[:, batch["input_ids"].shape[1]:].tolist()
    return [row[: row.index(eos)] if eos in row else row for row in rows]


def steerer(adapter, family, max_new_tokens, batch_size, **params):
    return VISTASteerer(backbone=adapter, prompt=FAMILY_PROMPTS[family], max_new_tokens=max_new_tokens,
                        batch_size=batch_size, sla_window=1, random_state=0, **params).fit()


def ids_of(estimator, images):
    return estimator._generate_ids(*estimator._read(images, reset=False))


def vista(family, images, max_new_tokens, repeats):
    model, processor = tiny_random_vlm(family)
    adapter = as_backbone(model, processor)
    plain = steerer(adapter, family, max_new_tokens, len(images), vsv=False, sla=False)
    with torch.inference_mode():
        ours = generate(adapter, adapter.build_inputs(images, [FAMILY_PROMPTS[family]] * len(images)),
                        max_new_tokens=max_new_tokens)
    same_hf = np.mean([a == b for a, b in zip(ours, hf_generate(model, processor, adapter, family, images,
                                                                  max_new_tokens))])
    zero = steerer(adapter, family, max_new_tokens, len(images), vsv_lambda=0.0, sla_gamma=0.0)
    same_zero = np.mean([a == b for a, b in zip(ids_of(zero, images), ids_of(plain, images))])
    # Costs at a fixed length: every contender generates max_new_tokens a row (random weights stop anywhere, and a
    # steered caption of another length would change the cost per token), the end token never chosen.
    endless = as_backbone(model, processor)
    endless.eos_token_id = int(endless.lm_head.weight.shape[0]) + 1
    costs = {}
    for batch in sorted({1, len(images)}):
        part = images[:batch]
        full = steerer(endless, family, max_new_tokens, batch, vsv_lambda=0.1)
        plain_b = steerer(endless, family, max_new_tokens, batch, vsv=False, sla=False)
        callables = {"generate": lambda: hf_generate(model, processor, adapter, family, part, max_new_tokens,
                                                     min_new_tokens=max_new_tokens),
                     "plain": lambda: ids_of(plain_b, part), "vista": lambda: ids_of(full, part)}
        timed = median_times(callables, repeats=repeats, warmup=1)
        costs[batch] = {name: seconds / max(1, sum(len(row) for row in ids)) for name, (seconds, ids) in timed.items()}
    return same_hf, same_zero, costs


class _Eager:
    """The official route: eager attention, the chosen queries' rows sliced from the full probabilities."""

    def __init__(self, adapter):
        self.adapter = adapter

    def teacher_forced(self, inputs, attention_layers=None, attention_rows=None):
        adapter = self.adapter
        if attention_layers is None:
            return type(adapter).teacher_forced(adapter, inputs)
        captured, handles, rows = {}, [], attention_rows
        cross = adapter.family == "mllama"
        keys = None if cross else adapter._image_keys(inputs)

        def keep(index):
            def hook(module, args, output):
                block = output[1][rows[:, 0], :, rows[:, 1]]  # (N, H, keys) of the (B, H, T, keys) weights
                if cross:
                    from skicml.vlm._hf_mllama import _CanvasLayout

                    layout, maps = _CanvasLayout(adapter, inputs), []
                    for n, sample in enumerate(rows[:, 0].tolist()):
                        maps.append(layout.maps(block[n:n + 1], sample))
                    captured[index] = torch.cat(maps)
                else:
                    captured[index] = block.gather(2, keys[rows[:, 0]][:, None, :].expand(-1, block.shape[1], -1))
            return hook

        for index in attention_layers:
            layer = adapter.layers[index]
            module = layer.cross_attn if cross else layer.self_attn
            handles.append(module.register_forward_hook(keep(index)))
        try:
            logits, _ = type(adapter).teacher_forced(adapter, inputs)
        finally:
            for handle in handles:
                handle.remove()
        return logits, torch.stack([captured[i] for i in attention_layers], dim=1)


def saved_megabytes(step):
    """Megabytes of the distinct tensors autograd saves for the backward pass of ``step``."""
    seen = {}

    def pack(tensor):
        seen[(tensor.untyped_storage().data_ptr(), tensor.dtype)] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        step()
    return sum(seen.values()) / 2 ** 20


def lavender(family, n_scenes, repeats):
    model, processor = tiny_random_vlm(family)
    images, captions, objects, masks = make_object_scenes(n_scenes, max_objects=3, image_size=32, return_masks=True,
                                                          random_state=0)
    teacher = OracleMaskTeacher(images, objects, masks)
    prompt = FAMILY_PROMPTS[family] + " :"
    steps, width = {}, None
    for arm, weight in (("plain", 0.0), ("lavender", 10.0), ("lavender-eager", 10.0)):
        arm_model = copy.deepcopy(model)
        if arm == "lavender-eager":
            arm_model.set_attn_implementation("eager")
        tuner = LavenderTuner(backbone=(arm_model, processor), teacher=teacher, align_weight=weight, prompt=prompt,
                              max_epochs=0, attn_resolution=8, random_state=0).fit(images, captions)
        tensors, _ = tuner._tensors(images, prompt, list(captions), teacher.word_maps(images, captions))
        torch.manual_seed(0)
        objective = tuner._objective().train()
        if arm == "lavender-eager":
            eager = _Eager(objective.backbone)
            objective.backbone.teacher_forced = eager.teacher_forced
        optimizer = torch.optim.AdamW([p for p in objective.parameters() if p.requires_grad], lr=1e-4)
        width = int(tensors["attention_mask"].sum(1).max())

        def step(objective=objective, optimizer=optimizer, batch=tensors):
            optimizer.zero_grad()
            objective(**batch).backward()
            optimizer.step()

        steps[arm] = step
    times = {arm: seconds for arm, (seconds, _) in median_times(steps, repeats=repeats, warmup=1).items()}
    memory = {arm: saved_megabytes(step) for arm, step in steps.items()}
    return width, times, memory


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--n-images", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--scenes", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.n_images, args.max_new_tokens, args.scenes, args.repeats = 2, 4, 4, 1
    torch.set_num_threads(args.threads)
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.get_num_threads()} thread(s); "
          f"VISTA: {args.n_images} scenes, {args.max_new_tokens} new tokens; Lavender: {args.scenes} captions a step")
    images = make_object_scenes(args.n_images, image_size=48, random_state=0)[0]
    print(f"{'family':16} {'==generate':>10} {'zero==plain':>11}  {'B':>2} {'generate':>9} {'plain':>9} "
          f"{'vista':>9} {'x plain':>7}   {'T':>3} {'plain ms':>8} {'lav ms':>8} {'eager ms':>8} "
          f"{'x plain':>7} {'plain MB':>8} {'lav MB':>7} {'eager MB':>8}")
    for family in args.families:
        same_hf, same_zero, costs = vista(family, images, args.max_new_tokens, args.repeats)
        width, times, memory = lavender(family, args.scenes, args.repeats)
        for k, (batch, cost) in enumerate(costs.items()):
            head = f"{family:16} {same_hf:>10.0%} {same_zero:>11.0%}" if k == 0 else " " * 39
            row = (f"{head}  {batch:>2} {cost['generate'] * 1e3:>7.2f}ms {cost['plain'] * 1e3:>7.2f}ms "
                   f"{cost['vista'] * 1e3:>7.2f}ms {cost['vista'] / cost['plain']:>6.2f}x")
            if k == 0:
                row += (f"   {width:>3} {times['plain'] * 1e3:>8.1f} {times['lavender'] * 1e3:>8.1f} "
                        f"{times['lavender-eager'] * 1e3:>8.1f} {times['lavender'] / times['plain']:>6.2f}x "
                        f"{memory['plain']:>8.1f} {memory['lavender']:>7.1f} {memory['lavender-eager']:>8.1f}")
            print(row, flush=True)


if __name__ == "__main__":
    main()
