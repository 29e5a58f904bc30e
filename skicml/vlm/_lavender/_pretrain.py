"""``skicml pretrain tiny-diffusion-teacher``: train the shipped diffusion teacher of Lavender.

The recipe behind ``skicml/vlm/_lavender/_weights/``::

    skicml pretrain tiny-diffusion-teacher --checkpoint run.pt --max-minutes 20   # resumable
    skicml pretrain tiny-diffusion-teacher --checkpoint run.pt --export tiny_diffusion_scenes.pt

A text-conditioned DDPM (:class:`TinyDiffusionTeacher`'s network) learns to
denoise :func:`skicml.datasets.make_object_scenes` images given their
captions, on scenes with the co-occurrence bias the shipped TinyVLM saw
(each class pulls in its partner with probability 0.8). Progress is judged
the way Lavender uses the teacher: the pointing accuracy of its per-word
maps (does a colour or shape word's map peak on an object of that colour or
shape) on unbiased held-out scenes. The export also records a calibration
table, on other held-out scenes: pointing accuracy per extraction timestep
and block.

``--task free-scenes`` trains it on :func:`skicml.datasets.make_free_object_scenes`
(objects off the token grid, overlapping, long captions), the testbed of
issue 58, and judges it on unbiased held-out scenes of that task (5 to 7
objects); its 8 x 8 maps (6-pixel patches) are finer than the student's
6 x 6 grid of 8-pixel patches::

    skicml pretrain tiny-diffusion-teacher --task free-scenes --patch 6 --d-model 96 --n-layers 4 ...

(the whole resumable command, its step count and its cost: ``doc/vlm.rst``).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

from ..._weights import save_module
from ...datasets import make_free_object_scenes, make_object_scenes
from ...utils.pretraining import add_run_options, recipe_provenance, run_recipe, set_threads
from .._grounding import pointing_accuracy
from .._pretrain import TASKS, task_scenes, task_vocabulary
from .._text import WordTokenizer
from ._diffusion_teacher import TinyDiffusionTeacher, word_maps_from_attention
from ._teacher_model import TeacherDDPM

__all__ = ["main"]

#: ``skicml pretrain tiny-diffusion-teacher`` (found by :func:`skicml.utils.discovery.all_pretrain_recipes`).
RECIPE_NAME = "tiny-diffusion-teacher"
#: Held-out scenes of the pointing evaluation (unbiased, 2 to 4 objects as in the Lavender spec's probe).
EVAL_SEED = 777
#: Scenes the extraction settings are chosen on, apart from those the accuracy is reported on.
CALIBRATION_SEED = 778
CALIBRATION_TIMESTEPS = (0, 1, 2, 5, 10, 20, 50, 90)
CALIBRATION_SETS = ((0, 1, 2), (2, 5, 10))


class SceneBatches:
    """Random batches of (image in [-1, 1], padded caption word ids)."""

    def __init__(self, images, captions, tokenizer, batch_size, seed):
        rows = [tokenizer.encode(c) for c in captions]
        self.word_ids = torch.full((len(rows), max(map(len, rows))), tokenizer.pad_token_id, dtype=torch.long)
        for i, row in enumerate(rows):
            self.word_ids[i, :len(row)] = torch.as_tensor(row)
        self.lengths = torch.as_tensor([len(r) for r in rows])
        self.images = torch.as_tensor(images).permute(0, 3, 1, 2).contiguous()  # uint8, 4x smaller than float
        self.batch_size = batch_size
        self.generator = torch.Generator().manual_seed(seed)
        self.step = 0

    def sample(self):
        self.step += 1
        index = torch.randint(len(self.images), (self.batch_size,), generator=self.generator)
        width = int(self.lengths[index].max())
        return {"images": self.images[index].float() / 127.5 - 1, "word_ids": self.word_ids[index, :width]}

    def state_dict(self):
        return {"step": self.step, "generator": self.generator.get_state()}

    def load_state_dict(self, state):
        self.step = int(state["step"])
        self.generator.set_state(state["generator"])


def denoising_loss(model, batch):
    return model(batch["images"], batch["word_ids"])


def held_out_scenes(n_scenes, image_size=48, seed=EVAL_SEED, task="object-scenes"):
    """Unbiased scenes with their masks: ``(images, captions, objects, masks)``.

    Of 2 to 4 objects for ``task="object-scenes"``, of the generator's 5 to 7
    for ``"free-scenes"`` (:func:`skicml.datasets.make_free_object_scenes`).
    """
    if task == "free-scenes":
        return make_free_object_scenes(n_scenes, image_size=image_size, cooccurrence=0.0, return_masks=True,
                                       random_state=seed)
    if task != "object-scenes":
        raise ValueError(f"task must be one of {TASKS}; got {task!r}.")
    return make_object_scenes(n_scenes, image_size=image_size, min_objects=2, max_objects=4, cooccurrence=0.0,
                              return_masks=True, random_state=seed)


def pointing_report(model, vocabulary, scenes, extract_timesteps=(0, 1, 2), extract_blocks=None):
    """Pointing accuracy of the teacher's maps on ``scenes``: ``{"color", "shape", "all", ...}``."""
    images, captions, objects, masks = scenes
    teacher = TinyDiffusionTeacher._from_module(model, vocabulary, extract_timesteps=extract_timesteps,
                                                extract_blocks=extract_blocks, batch_size=100, device="cpu")
    return pointing_accuracy(teacher.word_maps(images, captions), objects, masks)


def calibration_table(model, vocabulary, scenes, timesteps=CALIBRATION_TIMESTEPS,
                      timestep_sets=CALIBRATION_SETS):
    """Pointing accuracy in percent, ``[shape, colour]``, per extraction setting.

    One row per timestep of ``timesteps`` (each block alone and the mean of
    blocks), then one per set of ``timestep_sets`` (mean of blocks), each
    read exactly as :meth:`TinyDiffusionTeacher.word_maps` reads it (the
    fixed noise image ``i`` at the ``i``-th timestep of a set).
    """
    images, captions, objects, masks = scenes
    n_blocks = len(model.blocks)

    def score(attention, words):
        result = pointing_accuracy(word_maps_from_attention(attention, words, vocabulary), objects, masks)
        return [round(100 * result["shape"], 1), round(100 * result["color"], 1)]

    table = {}
    for steps in [(t,) for t in timesteps] + [tuple(s) for s in timestep_sets]:
        teacher = TinyDiffusionTeacher._from_module(model, vocabulary, extract_timesteps=steps, batch_size=100,
                                                    device="cpu")
        row = {}
        if len(steps) == 1:
            per_block = []
            for block in range(n_blocks):
                teacher.extract_blocks_ = [block]
                attention, words = teacher.word_attention(images, captions)
                per_block.append(attention)
                row[f"block {block}"] = score(attention, words)
            row["mean of blocks"] = score(np.mean(per_block, axis=0), words)
        else:
            row["mean of blocks"] = score(*teacher.word_attention(images, captions))
        table["t=" + ",".join(map(str, steps))] = row
    return table


def build_parser():
    parser = argparse.ArgumentParser(prog="skicml pretrain tiny-diffusion-teacher",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=TASKS, default="object-scenes",
                        help="object-scenes (the shipped teacher) or free-scenes (issue 58's testbed)")
    parser.add_argument("--scenes", type=int, default=12000, help="training scenes")
    parser.add_argument("--cooccurrence", type=float, default=0.8, help="partner pull probability in training")
    parser.add_argument("--image-size", type=int, default=48)
    parser.add_argument("--patch", type=int, default=6)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--n-layers", type=int, default=3)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--n-steps", type=int, default=100, help="timesteps of the noise schedule")
    parser.add_argument("--beta-max", type=float, default=0.05)
    parser.add_argument("--caption-dropout", type=float, default=0.1)
    parser.add_argument("--steps", type=int, default=1500, help="optimiser steps")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--eval-scenes", type=int, default=300)
    parser.add_argument("--extract-timesteps", type=int, nargs="+", default=[0, 1, 2])
    return add_run_options(parser, "model")


def main(argv=None):
    args = build_parser().parse_args(argv)
    set_threads(args)  # before the scenes are made, not only for the run
    tokenizer = WordTokenizer(task_vocabulary(args.task))
    images, captions, _ = task_scenes(args.task, args.scenes, image_size=args.image_size,
                                      cooccurrence=args.cooccurrence, random_state=args.seed + 1)
    scenes = held_out_scenes(args.eval_scenes, args.image_size, task=args.task)

    def build_model(run):
        return TeacherDDPM(len(tokenizer), image_size=args.image_size, patch=args.patch, d_model=args.d_model,
                           n_layers=args.n_layers, n_heads=args.n_heads, n_steps=args.n_steps,
                           beta_max=args.beta_max, caption_dropout=args.caption_dropout,
                           pad_id=tokenizer.pad_token_id, start_id=tokenizer.bos_token_id)

    def evaluate(model, step):
        report = pointing_report(model, tokenizer.vocabulary, scenes, args.extract_timesteps)
        return {"pointing_shape": report["shape"], "pointing_color": report["color"]}

    run_recipe(
        args, argv, RECIPE_NAME, build_model=build_model,
        make_source=lambda run: SceneBatches(images, captions, tokenizer, args.batch_size, args.seed),
        loss=denoising_loss, evaluate=evaluate,
        describe=lambda m: f"pointing shape {m['pointing_shape']:.3f}, colour {m['pointing_color']:.3f}",
        export=lambda run: _export(run, tokenizer.vocabulary, scenes),
        weight_decay=args.weight_decay, warmup_fraction=0.05, grad_clip=1.0, checkpoint_every=100,
    )
    return 0


def _export(run, vocabulary, scenes):
    """Write the teacher with its pointing accuracy on ``scenes`` and the calibration table on other scenes."""
    args, model = run.args, run.model
    report = pointing_report(model, vocabulary, scenes, args.extract_timesteps)
    table = calibration_table(model, vocabulary, held_out_scenes(args.eval_scenes, args.image_size, CALIBRATION_SEED,
                                                                 args.task))
    for row, cells in table.items():
        print(f"{row}: " + "  ".join(f"{k} {v[0]}/{v[1]}" for k, v in cells.items()), flush=True)
    generator, objects = (("make_object_scenes", "2-4") if args.task == "object-scenes"
                          else ("make_free_object_scenes", "5-7"))
    provenance = recipe_provenance(
        run, ("steps", "batch_size", "lr", "seed", "final_loss", "train_minutes", "threads", "torch"),
        data=(f"{args.scenes} {generator} scenes (random_state={args.seed + 1}, "
              f"cooccurrence={args.cooccurrence}, image_size={args.image_size})"),
        pointing_accuracy={
            "scenes": (f"{args.eval_scenes} unbiased held-out {generator} scenes (random_state="
                       f"{EVAL_SEED}, {objects} objects)"),
            "extract_timesteps": list(args.extract_timesteps),
            "shape": round(report["shape"], 4), "color": round(report["color"], 4),
            "n_shape": report["n_shape"], "n_color": report["n_color"],
        },
        calibration_shape_color_percent={
            "scenes": (f"{args.eval_scenes} unbiased {generator} scenes (random_state="
                       f"{CALIBRATION_SEED}, {objects} objects)"),
            **table,
        },
    )
    config = {**model.config, "vocabulary": list(vocabulary)}
    digest = save_module(args.export, model, config, provenance, dtype=torch.float16)
    print(f"pointing shape {report['shape']:.3f}, colour {report['color']:.3f}\n"
          f"wrote {args.export} (sha256 {digest})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
