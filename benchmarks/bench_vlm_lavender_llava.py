"""Lavender on a Hugging Face LLaVA: the cost of one training step against plain LoRA fine-tuning.

Random LLaVAs built offline from configs (:func:`skicml.vlm._tiny_llava.tiny_random_llava`),
so only mechanics and cost mean anything here. Each arm is one optimiser
step of :class:`~skicml.vlm.LavenderTuner`'s objective (forward, backward,
AdamW) on the same batch of scene captions, LoRA rank 8 on ``q_proj`` and
``v_proj``:

- ``plain``: the captions' cross-entropy alone (``align_weight=0``);
- ``lavender``: plus the alignment loss over every layer through the Aligner
  (the official default), the student's attention read by hooks through
  :func:`skicml.ops.row_logsumexp` and :func:`skicml.ops.subblock_attention_probs`
  while the model keeps its SDPA forward (what the tuner does);
- ``lavender-eager``: the same loss with the model switched to eager
  attention and the maps sliced from its full probabilities (the official
  code's ``output_attentions=True`` route);
- ``lavender-mean``: our route with no Aligner (``aggregation="mean"``), to
  tell the attention capture's cost from the Aligner's.

The arms are timed interleaved (:func:`_common.median_times`), so a busy
spell of a shared machine falls on all of them. ``saved MB`` is what
autograd keeps for the backward pass (the activation memory of a step),
summed over the distinct tensors saved; ``max |dP|`` compares the two
routes' attention maps.

    python benchmarks/bench_vlm_lavender_llava.py            # the recorded run
    python benchmarks/bench_vlm_lavender_llava.py --quick    # smoke test
"""

import argparse
import copy

import torch
from _common import median_times

from skicml.datasets import make_object_scenes
from skicml.vlm import HFLlavaAdapter, LavenderTuner, OracleMaskTeacher
from skicml.vlm._tiny_llava import tiny_random_llava

PROMPT = "<image> describe the image :"
#: name: (decoder layers, width, image pixels, batch) at 8-pixel patches: 16, 256 and 576 image tokens (the last
#: LLaVA-1.5's grid, where the image is most of the sequence).
CONFIGS = {"tiny": (3, 32, 32, 8), "small": (4, 128, 128, 8), "llava-grid": (4, 128, 192, 2)}


class EagerRoute(HFLlavaAdapter):
    """The official route: eager attention everywhere, the text-to-image block sliced from its probabilities."""

    def teacher_forced(self, inputs, attention_layers=None, attention_rows=None):
        if attention_layers is None:
            return super().teacher_forced(inputs)
        captured, handles = {}, []
        image = inputs["input_ids"] == self.image_token_id
        columns = image.nonzero()[:, 1].reshape(len(image), -1)
        rows = attention_rows

        def keep(index):
            def hook(module, args, output):
                weights = output[1]  # (B, H, T, T), what output_attentions=True returns
                block = weights[rows[:, 0], :, rows[:, 1]]  # (N, H, T)
                captured[index] = block.gather(2, columns[rows[:, 0]][:, None, :].expand(-1, block.shape[1], -1))
            return hook

        for index in attention_layers:
            handles.append(self.layers[index].self_attn.register_forward_hook(keep(index)))
        try:
            logits, _ = super().teacher_forced(inputs)
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


def arms(name, n_scenes):
    layers, hidden, image_size, batch_size = CONFIGS[name]
    model, processor = tiny_random_llava(num_layers=layers, hidden_size=hidden, image_size=image_size)
    images, captions, objects, masks = make_object_scenes(n_scenes, return_masks=True, random_state=0)
    teacher = OracleMaskTeacher(images, objects, masks)
    steps, objectives = {}, {}
    official = "aligner_then_mean"
    for arm, adapter_class, weight, aggregation in (
            ("plain", HFLlavaAdapter, 0.0, official), ("lavender", HFLlavaAdapter, 10.0, official),
            ("lavender-eager", EagerRoute, 10.0, official), ("lavender-mean", HFLlavaAdapter, 10.0, "mean")):
        arm_model = copy.deepcopy(model)
        if adapter_class is EagerRoute:
            arm_model.set_attn_implementation("eager")
        tuner = LavenderTuner(backbone=adapter_class(arm_model, processor), teacher=teacher, align_weight=weight,
                              aggregation=aggregation, prompt=PROMPT, max_epochs=0,
                              random_state=0).fit(images, captions)
        tensors, _ = tuner._tensors(images, PROMPT, list(captions), teacher.word_maps(images, captions))
        batch = {k: v[:batch_size] for k, v in tensors.items()}
        torch.manual_seed(0)
        objective = tuner._objective().train()
        optimizer = torch.optim.AdamW([p for p in objective.parameters() if p.requires_grad], lr=1e-4)

        def step(objective=objective, optimizer=optimizer, batch=batch):
            optimizer.zero_grad()
            objective(**batch).backward()
            optimizer.step()

        steps[arm], objectives[arm] = step, (objective, batch)
    return steps, objectives


def map_difference(objectives):
    """Largest difference between the two routes' attention of every target query in every layer."""
    found = []
    for arm in ("lavender", "lavender-eager"):
        objective, batch = objectives[arm]
        images = {k: v for k, v in batch.items() if k == "pixel_values"}
        with torch.no_grad():
            _, attention, _, _ = objective.run(batch["input_ids"], batch["attention_mask"], batch["target"], images,
                                               with_attention=True)
        found.append(attention)
    return float((found[0] - found[1]).abs().max())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--scenes", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.configs, args.repeats = ["tiny"], 2
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    print(f"{'config':10} {'layers':>6} {'width':>5} {'img':>4} {'T':>4} {'B':>2}  {'arm':15} {'ms/step':>8} "
          f"{'x plain':>7} {'saved MB':>8}")
    for name in args.configs:
        steps, objectives = arms(name, args.scenes)
        times = {arm: seconds for arm, (seconds, _) in median_times(steps, repeats=args.repeats, warmup=1).items()}
        memory = {arm: saved_megabytes(step) for arm, step in steps.items()}
        layers, hidden, image_size, batch_size = CONFIGS[name]
        width = int(objectives["plain"][1]["attention_mask"].sum(1).max())
        for arm in steps:
            print(f"{name:10} {layers:>6} {hidden:>5} {(image_size // 8) ** 2:>4} {width:>4} {batch_size:>2}  "
                  f"{arm:15} {times[arm] * 1e3:8.1f} {times[arm] / times['plain']:6.2f}x {memory[arm]:8.1f}")
        print(f"{name}: max |dP| between the routes' maps {map_difference(objectives):.1e}", flush=True)


if __name__ == "__main__":
    main()
