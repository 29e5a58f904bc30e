"""Lavender on the shipped TinyVLM: grounding and captions after plain fine-tuning and after Lavender.

Every arm starts from ``tiny-vlm-scenes`` and fine-tunes it with LoRA on the
same biased training scenes (:func:`skicml.datasets.make_object_scenes`,
co-occurrence 0.8, as the model was pretrained) for the same steps:

- ``plain``: the captions alone (``align_weight=0``); ``plain-2x``: for
  twice the epochs, what a user would try instead (the paper argues
  Lavender is the more data-efficient use of the budget);
- ``oracle``: plus the alignment loss towards the object masks
  (:class:`~skicml.vlm.OracleMaskTeacher`, the upper bound), through the
  Aligner (the official default);
- ``oracle-mean``: the same, aligning the mean attention over heads and
  layers itself (``aggregation="mean"``, no Aligner); ``oracle-last-layer``:
  the official aggregation (Aligner, then mean over the aligned layers) on
  the last layer only;
- ``diffusion``, ``diffusion-mean`` and ``diffusion-last-layer``: the same
  three towards the shipped diffusion teacher's cross-attention
  (:class:`~skicml.vlm.TinyDiffusionTeacher`).

``--seeds`` repeats every arm on fresh training scenes and a fresh LoRA and
Aligner initialisation per seed (the test scenes stay fixed), and the
summary gives the mean and standard deviation over seeds.
``--train-scenes`` sets the training set size; the number of steps follows
it (``epochs`` passes over it), the same for every arm, so the arms are
always compared at matched steps.

Measured on three fixed sets of fresh test scenes: drawn with the training
bias (``biased``), without it (``unbiased``: the classes drawn
independently, out of the training co-occurrences), and ``dense``, out of
the training distribution in the number of objects: 8 or 9 objects per
scene (no bias), where pretraining and fine-tuning scenes have 3 to 7, so
captions run longer than any the model was trained on and most cells are
full (pointing by chance is higher there: see the ``chance`` rows):

- pointing accuracy (does the argmax cell of a colour or shape word's map
  touch an object of that colour or shape), on the student's 3 x 3 grid of
  image tokens, every map area-resized to it: of the model's mean attention
  over the heads of all layers, from the query that predicts the word (the
  spec's probe metric), and over the heads of the last layer alone (read
  the same way in every arm, whichever layers it aligned), of its best
  single head, of the Aligner's output, and of the teachers' maps (also at
  their own 8 x 8) and of random maps (``chance``);
- the entropy of the two mean-attention maps (the paper's motivating
  measurement) and of the teachers' maps;
- CHAIR of greedy captions and their length in words, and the
  log-likelihood of the reference captions;
- seconds per training step.

    python benchmarks/bench_vlm_lavender.py                        # every arm, one seed
    python benchmarks/bench_vlm_lavender.py --seeds 0 1 2 --arms plain oracle-mean oracle-last-layer \
        diffusion-last-layer diffusion-mean                        # the recorded seeds
    python benchmarks/bench_vlm_lavender.py --train-scenes 250     # the small-data setting
    python benchmarks/bench_vlm_lavender.py --quick                # smoke test

``--task free-scenes`` runs the arms on the testbed of issue 58
(:func:`skicml.datasets.make_free_object_scenes`) from a student trained on
it (``--student``) towards a diffusion teacher trained on it
(``--teacher``), both exported files or the recipes' checkpoints, read as
``bench_vlm_testbed.py`` reads them. The training scenes are biased free
scenes, the test sets unbiased and biased ones (no dense set: the free
scenes already hold 5 to 7 objects), pointing is judged on the student's own
grid (6 x 6 at 8-pixel patches), captions get the task's 256-token budget,
and the ``-last-layer`` arms align the student's last layer. The default
arms are plain LoRA, plain LoRA for twice the steps, and Lavender towards
the diffusion teacher (the official Aligner aggregation)::

    python benchmarks/bench_vlm_lavender.py --task free-scenes --student free_student_vlm.pt \
        --teacher free_teacher.pt --seeds 0 1 2 --train-scenes 250
    python benchmarks/bench_vlm_lavender.py --task free-scenes --student free_student_vlm.pt \
        --teacher free_teacher.pt --seeds 0 1 2 --train-scenes 1000
    python benchmarks/bench_vlm_lavender.py --task free-scenes --quick     # smoke test, tiny untrained models
"""

import argparse
import re
import time

import numpy as np
import pandas as pd
import torch

from bench_vlm_testbed import (check_student, load_student, load_teacher, mean_sd, paired_differences, tiny_student,
                               tiny_teacher, truth_sets)

from skicml.datasets import object_classes
from skicml.vlm import LavenderTuner, OracleMaskTeacher, TinyDiffusionTeacher, chair, pointing_accuracy
from skicml.vlm._grounding import resize_map
from skicml.vlm._lavender._align import pool_word_maps, word_hits
from skicml.vlm._pretrain import MAX_NEW_TOKENS as TASK_MAX_NEW_TOKENS
from skicml.vlm._pretrain import task_scenes

TEACHER_NAME = "tiny-diffusion-scenes"
#: Pointing is judged on the student's own grid (TinyVLM's 3 x 3 image tokens), every map area-resized to it.
GRID = 3
ARMS = {
    "plain": dict(align_weight=0.0),
    "plain-2x": dict(align_weight=0.0, epochs_factor=2),
    "oracle": dict(teacher="oracle"),
    "oracle-mean": dict(teacher="oracle", aggregation="mean"),
    # The official aggregation on the last layer only, the one whose head 0 grounds words in tiny-vlm-scenes.
    "oracle-last-layer": dict(teacher="oracle", attn_layers="last"),
    "diffusion": dict(teacher="diffusion"),
    "diffusion-mean": dict(teacher="diffusion", aggregation="mean"),
    # Its twin towards the diffusion teacher: can the Aligner on the grounding layer follow a weak teacher
    # without dragging the rest of the model's attention along?
    "diffusion-last-layer": dict(teacher="diffusion", attn_layers="last"),
}
#: The arms of ``--task free-scenes`` by default: plain LoRA, with twice the steps, and Lavender (the Aligner).
FREE_ARMS = ["plain", "plain-2x", "diffusion"]
#: Seeds of the free-scenes sets: the test sets, and the training scenes (+ seed), apart from the other benchmarks'.
FREE_SEEDS = {"unbiased": 5951, "biased": 5952, "train": 6000}
#: Generation budget: a 9-object caption of the dense split runs to about 83 tokens, past the tuner's default 80.
MAX_NEW_TOKENS = 100


def scenes(n, cooccurrence, seed, task="object-scenes", grid=GRID, image_size=48, **options):
    """A set of scenes of ``task`` with what the evaluation reads, pointing judged on a ``grid`` x ``grid`` grid."""
    images, captions, objects, masks = task_scenes(task, n, cooccurrence=cooccurrence, return_masks=True,
                                                   random_state=seed, image_size=image_size, **options)
    truth = truth_sets(objects, n)
    # Each scene's colour and shape words -> the union of their objects' masks, made once per set: the
    # evaluation judges some 25 sets of maps per model, and pointing_accuracy rebuilds these for every call.
    unions = [{} for _ in range(n)]
    for scene, obj, color, shape in zip(objects["scene"], objects["object"], objects["color"], objects["shape"]):
        for word in (color, shape):
            unions[scene][word] = unions[scene].get(word, False) | masks[scene, obj]
    return {"images": images, "captions": captions, "objects": objects, "masks": masks, "truth": truth,
            "unions": unions, "colors": set(objects["color"]), "checked": False, "grid": grid}


def point(maps, test):
    """:func:`~skicml.vlm.pointing_accuracy` on the set's grid (GRID x GRID here), from its precomputed unions.

    The same rule (the argmax cell's pixel box touches an object of the word's colour or shape; words of
    absent attributes left out); the first call on a set is checked against the library's function.
    """
    size, grid = test["masks"].shape[-1], test["grid"]
    hits = {"color": [], "shape": []}
    for union, row in zip(test["unions"], maps):
        for word, word_map in row.items():
            if word not in union:
                continue
            word_map = resize_map(np.asarray(word_map, dtype=np.float32), grid)
            r, c = np.unravel_index(np.argmax(word_map), word_map.shape)
            top, bottom = int(np.floor(r * size / grid)), int(np.ceil((r + 1) * size / grid))
            left, right = int(np.floor(c * size / grid)), int(np.ceil((c + 1) * size / grid))
            hit = bool(union[word][top:bottom, left:right].any())
            hits["color" if word in test["colors"] else "shape"].append(hit)
    result = {kind: float(np.mean(v)) if v else float("nan") for kind, v in hits.items()}
    result["all"] = float(np.mean(hits["color"] + hits["shape"])) if hits["color"] + hits["shape"] else float("nan")
    if not test["checked"]:
        reference = pointing_accuracy(maps, test["objects"], test["masks"], resolution=grid)
        if not all(np.isclose(result[k], reference[k], equal_nan=True) for k in ("color", "shape", "all")):
            raise AssertionError(f"fast pointing {result} differs from pointing_accuracy {reference}")
        test["checked"] = True
    return result


def entropy(maps):
    """Mean Shannon entropy (nats) of maps normalised to sum 1, over all words of all images."""
    values = []
    for row in maps:
        for word_map in row.values():
            p = np.asarray(word_map, dtype=np.float64).ravel()
            if p.sum() <= 0:
                continue
            p = p / p.sum()
            values.append(-(p[p > 0] * np.log(p[p > 0])).sum())
    return float(np.mean(values)) if values else float("nan")


def colour_shape_words(objects):
    return set(objects["color"]) | set(objects["shape"])


def only(maps, words):
    return [{w: m for w, m in row.items() if w in words} for row in maps]


def best_head_pointing(tuner, test):
    """Pointing accuracy (colour + shape words) of each layer's each head; the best one and where it is."""
    words = colour_shape_words(test["objects"])
    tokenizer, model = tuner.backbone_.tokenizer, tuner.backbone_.model
    grid = int(round(np.sqrt(model.n_image_tokens)))
    side = tuner.attn_resolution
    keyed = [{w: np.zeros((side, side)) for w in tokenizer.words(c) if w in words} for c in test["captions"]]
    tensors, teacher_words = tuner._tensors(test["images"], tuner.prompt, list(test["captions"]), keyed)
    layers = list(range(len(model.layers)))
    with torch.inference_mode():
        probabilities = torch.cat([
            model(tensors["input_ids"][i:i + 64, :-1], images=tensors["images"][i:i + 64],
                  token_mask=tensors["attention_mask"][i:i + 64, :-1], attention_layers=layers)[2]
            for i in range(0, len(tensors["input_ids"]), 64)], dim=1)
    n_words = tensors["teacher_words"].shape[1]
    hits = word_hits(tensors["word_of"][:, 1:], tensors["target"][:, 1:], n_words) & tensors["teacher_words"][:, None]
    rows = hits.any(-1).nonzero()
    index = rows[:, 0] * n_words + hits[rows[:, 0], rows[:, 1]].float().argmax(-1)
    best = (-1.0, None)
    for layer in layers:
        for head in range(probabilities.shape[2]):
            maps = probabilities[layer, rows[:, 0], head, rows[:, 1] + model.n_image_tokens, :model.n_image_tokens]
            pooled, counts = pool_word_maps(maps, index, len(test["images"]), n_words)
            as_dicts = [{word: pooled[i, j].reshape(grid, grid).numpy()
                         for j, word in enumerate(teacher_words[i]) if counts[i, j] > 0}
                        for i in range(len(test["images"]))]
            accuracy = point(as_dicts, test)["all"]
            if accuracy > best[0]:
                best = (accuracy, f"L{layer}H{head}")
    return best


def evaluate(tuner, test):
    words = colour_shape_words(test["objects"])
    # The model's own attention read the same way in every arm, whichever layers it aligned: the mean over
    # heads of all layers, and of the last layer alone (where head 0 grounds words).
    n_layers = len(tuner.backbone_.model.layers)
    raw = only(tuner.word_maps(test["images"], test["captions"], aligned=False, layers=range(n_layers)), words)
    pointing = point(raw, test)
    last = only(tuner.word_maps(test["images"], test["captions"], aligned=False, layers=[n_layers - 1]), words)
    pointing_last = point(last, test)
    best, where = best_head_pointing(tuner, test)
    aligned = np.nan
    if getattr(tuner, "aligner_", None) is not None:
        aligned = point(only(tuner.word_maps(test["images"], test["captions"]), words), test)["all"]
    report = chair(list(tuner.predict(test["images"])), test["truth"], object_classes())
    return {"point_color": pointing["color"], "point_shape": pointing["shape"],
            "point_last_color": pointing_last["color"], "point_last_shape": pointing_last["shape"],
            "point_best_head": best, "best_head": where, "point_aligner": aligned, "entropy": entropy(raw),
            "entropy_last": entropy(last), "chair_s": report["chair_s"],
            "chair_i": report["chair_i"], "recall": report["recall"], "caption_words": report["mean_length"],
            "loglik": tuner.score(test["images"], test["captions"])}


def chance_maps(test, seed=0):
    """Maps of independent uniform noise for every colour and shape word: pointing at a random cell."""
    rng = np.random.default_rng(seed)
    words = colour_shape_words(test["objects"])
    return [{w: rng.random((test["grid"], test["grid"])) for w in set(re.findall(r"[a-z]+", caption)) & words}
            for caption in test["captions"]]


def teacher_row(name, teacher, test, native="8x8"):
    """Pointing of a teacher's maps (None: chance) on the set's grid and at their own resolution (``native``)."""
    words = colour_shape_words(test["objects"])
    if teacher is None:
        maps = chance_maps(test)
        pointing = pointing_accuracy(maps, test["objects"], test["masks"], resolution=test["grid"])
        return {"teacher": name, "point_color": pointing["color"], "point_shape": pointing["shape"]}
    maps = only(teacher.word_maps(test["images"], test["captions"]), words)
    pointing = pointing_accuracy(maps, test["objects"], test["masks"], resolution=test["grid"])
    fine = pointing_accuracy(maps, test["objects"], test["masks"])
    return {"teacher": name, "point_color": pointing["color"], "point_shape": pointing["shape"],
            f"point_color_{native}": fine["color"], f"point_shape_{native}": fine["shape"], "entropy": entropy(maps)}


def summarise(table, args, tests):
    """The means over seeds with their standard deviations, the ratios to plain, the cost per step."""
    print()
    print(f"Lavender on tiny-vlm-scenes: {args.train_scenes} training scenes, {args.epochs} epochs, batch "
          f"{args.batch_size}, lr {args.lr}, LoRA, align_weight {args.align_weight}, seeds {args.seeds}; "
          f"{args.test_scenes} test scenes per set; mean +- standard deviation over seeds")
    columns = ["point_color", "point_shape", "point_last_color", "point_last_shape", "point_best_head",
               "point_aligner", "entropy", "entropy_last", "chair_s", "chair_i", "recall", "caption_words", "loglik",
               "alignment_first", "alignment_last"]
    groups = table.groupby(["test", "arm"], sort=False)[columns]
    means, spreads = groups.mean(), groups.std()
    decimals = {"loglik": 4}
    shown = means.copy().astype(object)
    for column in columns:
        digits = decimals.get(column, 3)
        shown[column] = [f"{m:.{digits}f}" if np.isnan(sd) else f"{m:.{digits}f}+-{sd:.{digits}f}"
                         for m, sd in zip(means[column], spreads[column])]
    shown.insert(0, "seeds", groups.size())
    with pd.option_context("display.width", 300, "display.max_columns", 40):
        print(shown.to_string())
    print("best heads:", table.groupby("arm").best_head.agg(lambda h: sorted(set(h))).to_dict())
    # Differences to plain seed by seed (the training scenes of a seed are shared by all arms, so the
    # paired difference removes the part of the spread that comes from the draw of the scenes).
    keyed = table.set_index(["test", "arm", "seed"]).sort_index()
    for test_name in tests:
        if ("plain" not in table.arm.values) or test_name not in table.test.values:
            continue
        plain = keyed.loc[(test_name, "plain")]
        for arm in table.arm.unique():
            if arm in ("plain", "before"):
                continue
            compared = ["point_color", "point_shape", "point_last_color", "point_last_shape", "chair_i", "recall",
                        "loglik"]
            paired = (keyed.loc[(test_name, arm)][compared] - plain[compared]).dropna()
            print(f"{test_name}: {arm} - plain over {len(paired)} seeds: " + ", ".join(
                f"{column} {paired[column].mean():+.4f} (sd {paired[column].std():.4f})"
                for column in paired.columns))
    per_step = table.dropna(subset=["sec_per_step"]).groupby("arm").sec_per_step.mean()
    if "plain" in per_step.index:
        print("seconds per training step: " + ", ".join(
            f"{arm} {s:.3f} ({s / per_step['plain']:.2f}x plain)" for arm, s in per_step.items()))


def free_summary(table, args):
    """``--task free-scenes``: mean +- sd over seeds and the paired differences of each arm to plain LoRA."""
    print()
    print(f"Lavender on the free-scenes testbed: {args.train_scenes} training scenes, {args.epochs} epochs, batch "
          f"{args.batch_size}, lr {args.lr}, LoRA, align_weight {args.align_weight}, seeds {args.seeds}; "
          f"{args.test_scenes} test scenes per set; mean +- standard deviation over seeds")
    columns = ["point_color", "point_shape", "point_last_color", "point_last_shape", "point_best_head",
               "point_aligner", "chair_s", "chair_i", "recall", "caption_words", "loglik", "sec_per_step"]
    with pd.option_context("display.width", 300, "display.max_columns", 40):
        print(mean_sd(table, ["test", "arm"], columns, decimals={"loglik": 4}).to_string())
    compared = ["point_color", "point_shape", "point_last_color", "point_last_shape", "chair_i", "recall", "loglik"]
    for arm in table.arm.unique():
        if arm not in ("plain", "before"):
            for line in paired_differences(table[table.arm != "before"], ["test", "arm"], arm, "plain", compared):
                print(line)


def setup(args):
    """What the task's runs read: the test sets, the diffusion teacher, the backbone, a training-set maker."""
    if args.task == "object-scenes":
        tests = {"unbiased": scenes(args.test_scenes, 0.0, 5001), "biased": scenes(args.test_scenes, 0.8, 5002),
                 "dense": scenes(args.test_scenes, 0.0, 5003, min_objects=8, max_objects=9)}
        diffusion = TinyDiffusionTeacher(pretrained=TEACHER_NAME).fit()
        return dict(tests=tests, diffusion=diffusion, backbone=None, max_new_tokens=MAX_NEW_TOKENS, native="8x8",
                    train=lambda seed: scenes(args.train_scenes, 0.8, 100 + seed))
    if args.quick:
        student, diffusion = tiny_student(), tiny_teacher()
    else:
        student = check_student(load_student(args.student))
        diffusion = load_teacher(args.teacher, args.extract_timesteps)
    grid, size = int(round(np.sqrt(student.n_image_tokens))), student.image_size
    print(f"student: {sum(p.numel() for p in student.parameters()):,} parameters, {grid} x {grid} image tokens, "
          f"{len(student.layers)} layers; teacher: {diffusion.grid_size_} x {diffusion.grid_size_} maps", flush=True)
    free = dict(task="free-scenes", grid=grid, image_size=size)
    tests = {"unbiased": scenes(args.test_scenes, 0.0, FREE_SEEDS["unbiased"], **free),
             "biased": scenes(args.test_scenes, args.cooccurrence, FREE_SEEDS["biased"], **free)}
    return dict(tests=tests, diffusion=diffusion, backbone=student, native="native",
                max_new_tokens=args.max_new_tokens or TASK_MAX_NEW_TOKENS["free-scenes"],
                train=lambda seed: scenes(args.train_scenes, args.cooccurrence, FREE_SEEDS["train"] + seed, **free))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-scenes", type=int, default=1000)
    parser.add_argument("--test-scenes", type=int, default=300)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--align-weight", type=float, default=10.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--arms", nargs="+", default=None, choices=list(ARMS),
                        help="default: every arm (object-scenes); plain, plain-2x and diffusion (free-scenes)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    free = parser.add_argument_group("--task free-scenes (issue 58)")
    free.add_argument("--task", choices=["object-scenes", "free-scenes"], default="object-scenes")
    free.add_argument("--student", help="TinyVLM file or `skicml pretrain tiny-vlm --task free-scenes` checkpoint")
    free.add_argument("--teacher", help="teacher file or `skicml pretrain tiny-diffusion-teacher` checkpoint")
    free.add_argument("--extract-timesteps", type=int, nargs="+", default=[0, 1, 2], help="the teacher's")
    free.add_argument("--cooccurrence", type=float, default=0.8, help="bias of the training and biased scenes")
    free.add_argument("--max-new-tokens", type=int, default=None, help="default: 256 (the task's budget)")
    args = parser.parse_args()
    if args.arms is None:
        args.arms = list(ARMS) if args.task == "object-scenes" else FREE_ARMS
    if args.quick:
        args.train_scenes, args.test_scenes, args.epochs, args.seeds = 64, 40, 1, [0]
        if args.task == "free-scenes":
            args.train_scenes, args.test_scenes, args.seeds, args.max_new_tokens = 32, 8, [0, 1], 24
    elif args.task == "free-scenes" and not (args.student and args.teacher):
        parser.error("--task free-scenes needs --student and --teacher (or --quick)")
    torch.set_num_threads(args.threads)

    run = setup(args)
    tests, diffusion, max_new_tokens = run["tests"], run["diffusion"], run["max_new_tokens"]
    for test_name, test in tests.items():
        oracle = OracleMaskTeacher(test["images"], test["objects"], test["masks"])
        for name, teacher in (("oracle", oracle), ("diffusion", diffusion), ("chance", None)):
            print(f"teacher maps, {test_name}:", teacher_row(name, teacher, test, run["native"]), flush=True)
    rows = []
    before = LavenderTuner(backbone=run["backbone"], align_weight=0.0, max_epochs=0, max_new_tokens=max_new_tokens,
                           random_state=0).fit(tests["biased"]["images"][:2], tests["biased"]["captions"][:2])
    last_layer = len(before.backbone_.model.layers) - 1
    for test_name, test in tests.items():
        rows.append({"arm": "before", "seed": 0, "test": test_name, "sec_per_step": np.nan,
                     **evaluate(before, test)})
        print(rows[-1], flush=True)
    for seed in args.seeds:
        train = run["train"](seed)
        teachers = {"oracle": OracleMaskTeacher(train["images"], train["objects"], train["masks"]),
                    "diffusion": diffusion}
        # The teachers' maps are made once, offline as in the paper, and given in X: a training step's
        # time is then the tuner's alone.
        inputs = {}
        for name, teacher in teachers.items():
            if not any(ARMS[arm].get("teacher") == name for arm in args.arms):
                continue
            start = time.perf_counter()
            maps = teacher.word_maps(train["images"], train["captions"])
            print(f"seed {seed}: {name} teacher maps of {args.train_scenes} scenes in "
                  f"{time.perf_counter() - start:.1f} s", flush=True)
            inputs[name] = [{"image": image, "teacher_maps": m} for image, m in zip(train["images"], maps)]
        for arm in args.arms:
            settings = dict(ARMS[arm])
            epochs = args.epochs * settings.pop("epochs_factor", 1)
            X = train["images"]
            if settings.get("attn_layers") == "last":
                settings["attn_layers"] = [last_layer]
            if "teacher" in settings:
                X = inputs[settings.pop("teacher")]
                settings.setdefault("align_weight", args.align_weight)
            tuner = LavenderTuner(backbone=run["backbone"], max_epochs=epochs, batch_size=args.batch_size, lr=args.lr,
                                  max_new_tokens=max_new_tokens, random_state=seed, **settings)
            start = time.perf_counter()
            tuner.fit(X, train["captions"])
            seconds = (time.perf_counter() - start) / (epochs * -(-args.train_scenes // args.batch_size))
            alignment = [epoch["alignment"] for epoch in tuner.history_]
            print(f"seed {seed} {arm}: alignment loss by epoch {np.round(alignment, 4).tolist()}", flush=True)
            for test_name, test in tests.items():
                rows.append({"arm": arm, "seed": seed, "test": test_name, "sec_per_step": seconds,
                             "alignment_first": alignment[0], "alignment_last": alignment[-1],
                             **evaluate(tuner, test)})
                print(rows[-1], flush=True)
    if args.task == "free-scenes":
        free_summary(pd.DataFrame(rows), args)
    else:
        summarise(pd.DataFrame(rows), args, tests)


if __name__ == "__main__":
    main()
