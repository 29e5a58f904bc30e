"""``skicml pretrain tiny-vlm``: train the shipped TinyVLM on captioned object scenes.

The recipe behind ``skicml/vlm/_weights/``::

    skicml pretrain tiny-vlm --checkpoint run.pt --max-minutes 40   # resumable
    skicml pretrain tiny-vlm --checkpoint run.pt --export tiny_vlm.pt

``--task free-scenes`` trains on :func:`skicml.datasets.make_free_object_scenes`
instead (objects off the token grid, partly overlapping, captions of 100+
tokens): the testbed of issue 58, where a student with 8-pixel patches (36
image tokens) and 8-12 layers has to ground its words::

    skicml pretrain tiny-vlm --task free-scenes --patch-size 8 --num-layers 10 --hidden-size 128 ...

(the whole resumable command, its step count and its cost: ``doc/vlm.rst``).

The scenes (:func:`skicml.datasets.make_object_scenes`) carry the
co-occurrence bias of the VISTA probe (each class pulls in its partner with
probability 0.8), and a share of the batches is text-only, as in LLM
pretraining: the model gets a language prior, and VISTA's negative context
(the prompt without the image) is something it has seen. Progress is judged
the way VISTA is: CHAIR of greedy captions on unbiased held-out scenes.
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F

from ..datasets import free_object_scene_words, make_free_object_scenes, make_object_scenes, object_classes
from ..utils.pretraining import add_run_options, metrics_line, recipe_provenance, run_recipe, set_threads
from ._backbone import as_backbone
from ._chair import chair
from ._generate import generate
from ._model import TinyVLM
from ._pretrained import save_tiny_vlm
from ._text import DEFAULT_PROMPT, WordTokenizer, encode_captions, scene_vocabulary

__all__ = ["main"]

#: ``skicml pretrain tiny-vlm`` (found by :func:`skicml.utils.discovery.all_pretrain_recipes`).
RECIPE_NAME = "tiny-vlm"
#: The scene tasks a TinyVLM can be trained on, by ``--task``.
TASKS = ("object-scenes", "free-scenes")
#: Greedy caption budget of each task's evaluation: its longest captions (7 objects) fit.
MAX_NEW_TOKENS = {"object-scenes": 80, "free-scenes": 256}


def task_scenes(task, n_scenes, *, cooccurrence=0.0, random_state=None, image_size=48, min_objects=None,
                max_objects=None, overlap=None, return_masks=False):
    """Scenes of ``task``: :func:`make_object_scenes` or :func:`make_free_object_scenes`.

    ``min_objects``, ``max_objects`` and ``overlap`` (free scenes only) are
    the generator's defaults when None. Returns what the generator returns.
    """
    options = {k: v for k, v in dict(min_objects=min_objects, max_objects=max_objects).items() if v is not None}
    if task == "object-scenes":
        if overlap is not None:
            raise ValueError("overlap is an option of the free-scenes task; object-scenes never overlap.")
        return make_object_scenes(n_scenes, image_size=image_size, cooccurrence=cooccurrence,
                                  return_masks=return_masks, random_state=random_state, **options)
    if task == "free-scenes":
        if overlap is not None:
            options["overlap"] = overlap
        return make_free_object_scenes(n_scenes, image_size=image_size, cooccurrence=cooccurrence,
                                       return_masks=return_masks, random_state=random_state, **options)
    raise ValueError(f"task must be one of {TASKS}; got {task!r}.")


def task_vocabulary(task, prompt=DEFAULT_PROMPT):
    """The TinyVLM vocabulary of ``task``: every word its captions or ``prompt`` can hold."""
    if task == "object-scenes":
        return scene_vocabulary(prompt)
    if task == "free-scenes":
        return WordTokenizer.from_texts([prompt], extra=free_object_scene_words()).vocabulary
    raise ValueError(f"task must be one of {TASKS}; got {task!r}.")


class CaptionBatches:
    """Random batches of (image, prompt + caption) sequences; a share of them without images."""

    def __init__(self, images, captions, tokenizer, prompt, batch_size, text_only_fraction, seed):
        self.ids, self.mask, self.target = encode_captions(tokenizer, prompt, captions)
        self.lengths = self.mask.sum(1)
        self.images = torch.as_tensor(images)
        self.batch_size, self.text_only_fraction = batch_size, text_only_fraction
        self.generator = torch.Generator().manual_seed(seed)
        self.step = 0

    def sample(self):
        self.step += 1
        index = torch.randint(len(self.ids), (self.batch_size,), generator=self.generator)
        width = int(self.lengths[index].max())
        batch = {"ids": self.ids[index, :width], "mask": self.mask[index, :width],
                 "target": self.target[index, :width]}
        if torch.rand((), generator=self.generator) >= self.text_only_fraction:
            batch["images"] = self.images[index].float() / 255.0
        return batch

    def state_dict(self):
        return {"step": self.step, "generator": self.generator.get_state()}

    def load_state_dict(self, state):
        self.step = int(state["step"])
        self.generator.set_state(state["generator"])


def caption_loss(model, batch):
    """Cross-entropy of the caption words and the end token, given the image (if any) and the prompt."""
    ids = batch["ids"]
    hidden, _ = model(ids[:, :-1], images=batch.get("images"), token_mask=batch["mask"][:, :-1])
    hidden = hidden[:, -(ids.shape[1] - 1):]  # the text positions, past the image tokens
    target = batch["target"][:, 1:]
    return F.cross_entropy(model.lm_head(hidden[target]), ids[:, 1:][target])


def caption_report(model, n_scenes=300, max_new_tokens=None, prompt=DEFAULT_PROMPT, seed=777, cooccurrence=0.0,
                   task="object-scenes", **scene_options):
    """CHAIR of greedy captions on fresh scenes of ``task`` (unbiased by default).

    ``max_new_tokens`` None is the task's budget (:data:`MAX_NEW_TOKENS`);
    ``scene_options`` go to :func:`task_scenes` (the image size must be the
    model's).
    """
    max_new_tokens = MAX_NEW_TOKENS[task] if max_new_tokens is None else max_new_tokens
    scene_options.setdefault("image_size", model.image_size)
    images, _, objects = task_scenes(task, n_scenes, cooccurrence=cooccurrence, random_state=seed, **scene_options)
    truth = objects.groupby("scene")["name"].apply(set).reindex(range(n_scenes)).tolist()
    backbone = as_backbone(model)
    captions = []
    with torch.inference_mode():
        for start in range(0, n_scenes, 100):
            inputs = backbone.build_inputs(images[start:start + 100], prompt)
            captions += [backbone.decode(ids) for ids in generate(backbone, inputs, max_new_tokens=max_new_tokens)]
    return chair(captions, truth, object_classes())


def build_parser():
    parser = argparse.ArgumentParser(prog="skicml pretrain tiny-vlm", description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=TASKS, default="object-scenes",
                        help="object-scenes: one object a grid cell (the shipped model); free-scenes: objects off "
                             "the token grid, overlapping, 100+ token captions (issue 58)")
    parser.add_argument("--image-size", type=int, default=48)
    parser.add_argument("--min-objects", type=int, default=None, help="default: the task generator's")
    parser.add_argument("--max-objects", type=int, default=None, help="default: the task generator's")
    parser.add_argument("--overlap", type=float, default=None, help="free-scenes only; default: 0.3")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="caption budget of the evaluations; default: 80 object-scenes, 256 free-scenes")
    parser.add_argument("--scenes", type=int, default=20000, help="training scenes")
    parser.add_argument("--cooccurrence", type=float, default=0.8, help="partner pull probability in training")
    parser.add_argument("--text-only-fraction", type=float, default=0.2)
    parser.add_argument("--hidden-size", type=int, default=96)
    parser.add_argument("--num-layers", type=int, default=6)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--patch-size", type=int, default=16, help="16: one image token a grid cell")
    parser.add_argument("--steps", type=int, default=2500)
    parser.add_argument("--batch-size", type=int, default=48)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--eval-scenes", type=int, default=300)
    return add_run_options(parser, "model")


def main(argv=None):
    args = build_parser().parse_args(argv)
    set_threads(args)  # before the scenes are made, not only for the run
    tokenizer = WordTokenizer(task_vocabulary(args.task))
    images, captions, _ = task_scenes(args.task, args.scenes, cooccurrence=args.cooccurrence,
                                      random_state=args.seed + 1, **_scene_options(args))

    def evaluate(model, step):
        report = caption_report(model, args.eval_scenes, args.max_new_tokens, task=args.task, **_scene_options(args))
        return {k: float(report[k]) for k in ("chair_s", "chair_i", "recall", "f1")}

    run_recipe(
        args, argv, RECIPE_NAME,
        build_model=lambda run: TinyVLM(tokenizer.vocabulary, hidden_size=args.hidden_size,
                                        num_layers=args.num_layers, head_dim=args.head_dim,
                                        patch_size=args.patch_size, image_size=args.image_size),
        make_source=lambda run: CaptionBatches(images, captions, tokenizer, DEFAULT_PROMPT, args.batch_size,
                                               args.text_only_fraction, args.seed),
        loss=caption_loss, evaluate=evaluate, describe=metrics_line, export=_export,
        weight_decay=args.weight_decay, warmup_fraction=0.05, grad_clip=1.0, checkpoint_every=250,
    )
    return 0


def _scene_options(args):
    """The scene generator's options of the command line (the defaults left to the generator)."""
    return dict(image_size=args.image_size, min_objects=args.min_objects, max_objects=args.max_objects,
                overlap=args.overlap)


def _export(run):
    """Write the model with CHAIR on 500 unbiased and 500 biased fresh scenes."""
    args = run.args
    options = _scene_options(args)
    unbiased = caption_report(run.model, 500, args.max_new_tokens, seed=4242, task=args.task, **options)
    biased = caption_report(run.model, 500, args.max_new_tokens, seed=4243, cooccurrence=args.cooccurrence,
                            task=args.task, **options)
    generator = "make_object_scenes" if args.task == "object-scenes" else "make_free_object_scenes"
    shown = ", ".join(f"{k}={v}" for k, v in options.items() if v is not None)
    provenance = recipe_provenance(
        run,
        data=(f"{args.scenes} {generator} scenes (random_state={args.seed + 1}, "
              f"cooccurrence={args.cooccurrence}, {shown}), {args.text_only_fraction:.0%} of batches text-only"),
        prompt=DEFAULT_PROMPT,
        chair_unbiased_500={k: round(float(v), 4) for k, v in unbiased.items()},
        chair_biased_500={k: round(float(v), 4) for k, v in biased.items()},
    )
    digest = save_tiny_vlm(args.export, run.model, provenance)
    print(f"unbiased CHAIR {unbiased}\nbiased CHAIR {biased}\nwrote {args.export} (sha256 {digest})")


if __name__ == "__main__":
    sys.exit(main())
