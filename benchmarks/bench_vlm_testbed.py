"""The premises of VISTA and Lavender, measured on a student and a teacher of the free-scenes testbed (issue 58).

Before the methods are compared on a model, check that their premises can
hold on it. The testbed is :func:`skicml.datasets.make_free_object_scenes`
(objects off the token grid, partly overlapping, captions of 100+ tokens), a
TinyVLM trained on it with 8-pixel patches (36 image tokens), and a diffusion
teacher trained on it (``skicml pretrain tiny-vlm --task free-scenes`` and
``skicml pretrain tiny-diffusion-teacher --task free-scenes``). Everything is
measured on fresh unbiased held-out scenes.

VISTA's premises, from :meth:`skicml.vlm.VISTASteerer.token_rankings` on
plain greedy captions (no steering), tracking the colour and shape words
(one token each): at every step and layer, where each word ranks in the
logit lens's vocabulary; a word is *present* when the scene holds an object
of that colour or shape, *absent* otherwise.

- **visual information loss**: the present words' median rank (last layer)
  in each quarter of the caption, from the first to the last; the premise
  holds when it worsens (rises) from the first quarter to the last, and the
  gap to the absent words narrows;
- **early excitation**: the present words' median rank at each layer, over
  all steps and at the steps where the word is generated; the premise holds
  when the best layer is below the last (the paper: the penultimate or a
  little earlier);
- **hidden genuine information**: present words the caption never names
  rank, against absent words.

Lavender's premise, with :func:`skicml.vlm.pointing_accuracy` of the
colour and shape words of the reference captions, every map area-resized to
the student's grid of image tokens: the student's mean attention over the
heads of all layers (and of each layer alone), the teacher's per-word
cross-attention maps, and random maps (chance). The issue asks the teacher
to point at least 0.15 above the student's mean attention.

    python benchmarks/bench_vlm_testbed.py --student free.pt --teacher teacher.pt        # the recorded run
    python benchmarks/bench_vlm_testbed.py --quick                                        # smoke test

``--student`` and ``--teacher`` take exported files (``--export``) or the
recipes' resumable checkpoints (``--checkpoint``, read as they are, mid-run or
finished); ``--quick`` builds tiny untrained ones instead.
"""

import argparse
import os
import re
import time

import numpy as np
import torch

from skicml.datasets import free_object_scene_words
from skicml.vlm import LavenderTuner, TinyDiffusionTeacher, TinyVLM, VISTASteerer, pointing_accuracy
from skicml.vlm._lavender._pretrain import held_out_scenes
from skicml.vlm._lavender._teacher_model import TeacherDDPM
from skicml.vlm._pretrain import MAX_NEW_TOKENS, task_vocabulary
from skicml.vlm._pretrained import load_tiny_vlm

COLORS = ("red", "green", "blue", "yellow", "purple", "orange")
SHAPES = ("circle", "square", "triangle", "cross")
#: Held-out scenes of every measurement (unbiased), apart from the recipes' evaluation seeds.
SEED = 5858
_TEACHER_ARCHITECTURE = ("image_size", "patch", "d_model", "n_layers", "n_heads", "n_steps", "beta_max",
                         "caption_dropout")


def _checkpoint(path):
    """A recipe checkpoint's ``(state_dict, recipe options)``, or None for another kind of file."""
    if not os.path.exists(path):
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not (isinstance(state, dict) and "model" in state and "history" in state):
        return None
    return state["model"], {**state["history"].get("meta", {}), "reached_step": state["history"]["step"]}


def load_student(path):
    """A TinyVLM from an exported file, a shipped name or a ``skicml pretrain tiny-vlm`` checkpoint."""
    found = _checkpoint(path)
    if found is None:
        return load_tiny_vlm(path)
    state, meta = found
    model = TinyVLM(task_vocabulary(meta.get("task", "object-scenes")), image_size=meta.get("image_size", 48),
                    patch_size=meta["patch_size"], hidden_size=meta["hidden_size"], num_layers=meta["num_layers"],
                    head_dim=meta["head_dim"])
    model.load_state_dict(state)
    print(f"student: checkpoint {path}, step {meta['reached_step']} of {meta.get('steps')}", flush=True)
    return model.eval()


def load_teacher(path, extract_timesteps):
    """A fitted TinyDiffusionTeacher from an exported file, a shipped name or a recipe checkpoint."""
    found = _checkpoint(path)
    if found is None:
        return TinyDiffusionTeacher(pretrained=path, extract_timesteps=extract_timesteps, device="cpu").fit()
    state, meta = found
    vocabulary = task_vocabulary(meta.get("task", "object-scenes"))
    module = TeacherDDPM(len(vocabulary), **{k: meta[k] for k in _TEACHER_ARCHITECTURE}, pad_id=0, start_id=1)
    module.load_state_dict(state)
    print(f"teacher: checkpoint {path}, step {meta['reached_step']} of {meta.get('steps')}", flush=True)
    return TinyDiffusionTeacher._from_module(module, vocabulary, extract_timesteps=extract_timesteps,
                                             batch_size=100, device="cpu")


def tiny_student(image_size=48):
    """An untrained small student (8-pixel patches, 36 image tokens, 3 layers): smoke tests."""
    torch.manual_seed(0)
    student = TinyVLM(task_vocabulary("free-scenes"), image_size=image_size, patch_size=8, hidden_size=32,
                      num_layers=3, head_dim=16)
    return student.eval()


def tiny_teacher(image_size=48, seed=1):
    """An untrained small diffusion teacher (4-pixel patches, 12 x 12 maps): smoke tests (seed None: torch's)."""
    if seed is not None:
        torch.manual_seed(seed)
    vocabulary = task_vocabulary("free-scenes")
    module = TeacherDDPM(len(vocabulary), image_size=image_size, patch=4, d_model=16, n_layers=1, n_heads=2,
                         n_steps=100, beta_max=0.05, caption_dropout=0.1, pad_id=0, start_id=1)
    return TinyDiffusionTeacher._from_module(module, vocabulary, extract_timesteps=(0, 1, 2), batch_size=100,
                                             device="cpu")


def tiny_models(image_size=48):
    """An untrained small student (8-pixel patches, 36 image tokens) and teacher (4-pixel patches): smoke test."""
    return tiny_student(image_size), tiny_teacher(image_size, seed=None)  # the teacher drawn after the student


def check_student(student):
    """Refuse a student whose vocabulary lacks words of the free scenes (one trained on another task)."""
    unknown = set(free_object_scene_words()) - set(student.vocabulary)
    if unknown:
        raise SystemExit(f"the student was not trained on free scenes: it lacks {sorted(unknown)[:5]}")
    return student


def truth_sets(objects, n):
    """Each scene's set of object names (colour shape), the ground truth of CHAIR and POPE."""
    return objects.groupby("scene")["name"].apply(set).reindex(range(n)).tolist()


# --------------------------------------------------------------------------
# The method benchmarks' tables over seeds (bench_vlm_vista, bench_vlm_lavender on free scenes)
# --------------------------------------------------------------------------
def mean_sd(table, keys, columns, digits=3, decimals=None):
    """``mean+-sd`` over the rows of each group of ``keys`` (the seeds), with the number of rows.

    ``digits`` decimals, or ``decimals[column]`` for the columns it names.
    """
    groups = table.groupby(keys, sort=False)[columns]
    means, spreads = groups.mean(), groups.std()
    shown = means.copy().astype(object)
    for column in columns:
        d = (decimals or {}).get(column, digits)
        shown[column] = [f"{m:.{d}f}" if np.isnan(sd) else f"{m:.{d}f}+-{sd:.{d}f}"
                         for m, sd in zip(means[column], spreads[column])]
    shown.insert(0, "seeds", groups.size())
    return shown


def paired_differences(table, keys, arm, base, columns, digits=4):
    """Lines of ``arm`` minus ``base`` seed by seed (rows matched on ``keys`` + seed): mean (sd) over seeds."""
    lines = []
    others = [k for k in keys if k != "arm"]
    keyed = table.set_index(others + ["arm", "seed"]).sort_index()
    for group in table[others].drop_duplicates().itertuples(index=False):
        group = tuple(group)
        try:
            paired = (keyed.loc[group + (arm,)][columns] - keyed.loc[group + (base,)][columns]).dropna()
        except KeyError:
            continue
        lines.append(f"{' '.join(map(str, group))}: {arm} - {base} over {len(paired)} seeds: " + ", ".join(
            f"{c} {paired[c].mean():+.{digits}f} (sd {paired[c].std():.{digits}f})" for c in columns))
    return lines


# --------------------------------------------------------------------------
# VISTA's premises: token rankings of plain captions
# --------------------------------------------------------------------------
def rankings(student, images, objects, max_new_tokens):
    """Ranks (n, words, steps, layers), the generated words, and which tracked word each scene holds."""
    words = list(COLORS + SHAPES)
    steerer = VISTASteerer(backbone=student, vsv=False, sla=False, sla_window=1, decoding="greedy",
                           max_new_tokens=max_new_tokens,
                           batch_size=50, device="cpu", random_state=0).fit()
    ranks, generated = steerer.token_rankings(images, words, return_tokens=True)
    present = np.zeros((len(images), len(words)), dtype=bool)
    for scene, color, shape in zip(objects["scene"], objects["color"], objects["shape"]):
        present[scene, words.index(color)] = present[scene, words.index(shape)] = True
    return ranks, generated, present, words


def quarter_ranks(ranks, present, layer=-1):
    """Median rank of present and absent words in each quarter of each caption, at ``layer``."""
    n, _, n_steps, _ = ranks.shape
    rows = []
    lengths = (~np.isnan(ranks[:, 0, :, layer])).sum(1)
    for q in range(4):
        chosen = {"present": [], "absent": []}
        for i in range(n):
            length = int(lengths[i])
            if length < 4:
                continue
            steps = slice(q * length // 4, (q + 1) * length // 4)
            chosen["present"].append(ranks[i, present[i], steps, layer].ravel())
            chosen["absent"].append(ranks[i, ~present[i], steps, layer].ravel())
        row = {}
        for kind, values in chosen.items():
            values = np.concatenate(values) if values else np.array([np.nan])
            values = values[~np.isnan(values)]
            row[kind] = float(np.median(values)) if values.size else np.nan
            row[f"{kind}_log2"] = float(np.mean(np.log2(values))) if values.size else np.nan
        rows.append(row)
    return rows


def layer_ranks(ranks, present, generated, words):
    """Per layer: the present words' median rank over all steps, and at the steps that generate them."""
    n_layers = ranks.shape[-1]
    everywhere = [float(np.nanmedian(np.concatenate([ranks[i, present[i], :, layer].ravel()
                                                     for i in range(len(ranks))])))
                  for layer in range(n_layers)]
    emitted = [[] for _ in range(n_layers)]
    for i, tokens in enumerate(generated):
        for t, token in enumerate(tokens):
            token = token.strip()
            if token in words and present[i, words.index(token)]:
                for layer in range(n_layers):
                    emitted[layer].append(ranks[i, words.index(token), t, layer])
    at_emission = [float(np.median(v)) if v else np.nan for v in emitted]
    return everywhere, at_emission, len(emitted[0])


def hidden_genuine(ranks, present, generated, words, layer=-1):
    """Median rank (``layer``, all steps) of present words never generated, against absent words."""
    hidden, absent = [], []
    for i, tokens in enumerate(generated):
        said = {t.strip() for t in tokens}
        for j, word in enumerate(words):
            values = ranks[i, j, :, layer]
            values = values[~np.isnan(values)]
            if present[i, j] and word not in said:
                hidden.append(values)
            elif not present[i, j]:
                absent.append(values)
    median = lambda parts: float(np.median(np.concatenate(parts))) if parts else np.nan  # noqa: E731
    return median(hidden), median(absent), len(hidden)


# --------------------------------------------------------------------------
# Lavender's premise: pointing of the student's attention and of the teacher's maps
# --------------------------------------------------------------------------
def attribute_words(objects):
    return set(objects["color"]) | set(objects["shape"])


def only(maps, words):
    return [{w: m for w, m in row.items() if w in words} for row in maps]


def chance_maps(captions, words, grid, seed=0):
    rng = np.random.default_rng(seed)
    return [{w: rng.random((grid, grid)) for w in set(re.findall(r"[a-z]+", caption)) & words} for caption in captions]


def pointing_rows(student, teacher, scenes):
    images, captions, objects, masks = scenes
    captions = list(captions)
    grid = int(round(np.sqrt(student.n_image_tokens)))
    words = attribute_words(objects)
    n_layers = len(student.layers)
    # align_weight=0 and max_epochs=0: no training, only the student's own attention read as Lavender reads it
    tuner = LavenderTuner(backbone=student, teacher=None, align_weight=0.0, max_epochs=0, attn_resolution=grid,
                          device="cpu", random_state=0, verbose=0).fit(images[:2], captions[:2])
    rows = {}
    start = time.perf_counter()
    mean_maps = only(tuner.word_maps(images, captions, aligned=False, layers=range(n_layers)), words)
    rows["student: mean attention, all layers"] = pointing_accuracy(mean_maps, objects, masks, resolution=grid)
    for layer in range(n_layers):
        maps = only(tuner.word_maps(images, captions, aligned=False, layers=[layer]), words)
        rows[f"student: layer {layer}"] = pointing_accuracy(maps, objects, masks, resolution=grid)
    student_seconds = time.perf_counter() - start
    start = time.perf_counter()
    teacher_maps = only(teacher.word_maps(images, captions), words)
    teacher_seconds = time.perf_counter() - start
    rows["teacher"] = pointing_accuracy(teacher_maps, objects, masks, resolution=grid)
    native = teacher.grid_size_
    rows[f"teacher at its {native} x {native}"] = pointing_accuracy(teacher_maps, objects, masks)
    rows["chance"] = pointing_accuracy(chance_maps(captions, words, grid), objects, masks, resolution=grid)
    return rows, grid, student_seconds, teacher_seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--student", help="TinyVLM file or `skicml pretrain tiny-vlm --task free-scenes` checkpoint")
    parser.add_argument("--teacher", help="teacher file or `skicml pretrain tiny-diffusion-teacher` checkpoint")
    parser.add_argument("--n-scenes", type=int, default=200, help="held-out scenes of the rankings")
    parser.add_argument("--n-pointing-scenes", type=int, default=300, help="held-out scenes of the pointing")
    parser.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS["free-scenes"])
    parser.add_argument("--extract-timesteps", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="tiny untrained models, a few scenes")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        student, teacher = tiny_models()
        args.n_scenes, args.n_pointing_scenes, args.max_new_tokens = 4, 4, 24
    else:
        if not (args.student and args.teacher):
            parser.error("--student and --teacher are needed (or --quick)")
        student = load_student(args.student)
        teacher = load_teacher(args.teacher, args.extract_timesteps)
    check_student(student)
    size = student.image_size
    print(f"student: {sum(p.numel() for p in student.parameters()):,} parameters, {student.n_image_tokens} image "
          f"tokens, {len(student.layers)} layers; teacher: {teacher.grid_size_} x {teacher.grid_size_} maps, "
          f"{len(teacher.module_.blocks)} blocks", flush=True)

    # VISTA's premises
    images, _, objects, _ = held_out_scenes(args.n_scenes, size, seed=SEED, task="free-scenes")
    start = time.perf_counter()
    ranks, generated, present, words = rankings(student, images, objects, args.max_new_tokens)
    seconds = time.perf_counter() - start
    lengths = [len(g) for g in generated]
    print(f"\n== token rankings: {args.n_scenes} unbiased scenes, plain greedy captions of {np.mean(lengths):.0f} "
          f"tokens on average ({seconds:.0f} s) ==", flush=True)
    print("visual information loss: median rank (log2 mean) at the last layer, by quarter of the caption")
    quarters = quarter_ranks(ranks, present)
    for q, row in enumerate(quarters, start=1):
        print(f"  Q{q}: present {row['present']:7.1f} ({row['present_log2']:.2f})   absent {row['absent']:7.1f} "
              f"({row['absent_log2']:.2f})")
    loss = quarters[-1]["present_log2"] - quarters[0]["present_log2"]
    gap = [(row["absent_log2"] - row["present_log2"]) for row in quarters]
    verdict = "worsens: the premise holds" if loss > 0 else "does not worsen"
    print(f"  present words' log2 rank, Q4 - Q1: {loss:+.2f} ({verdict}); "
          f"absent - present gap Q1 {gap[0]:.2f} -> Q4 {gap[-1]:.2f}")
    everywhere, at_emission, n_emitted = layer_ranks(ranks, present, generated, words)
    n_layers = len(everywhere)
    print("early excitation: present words' median rank per layer (all steps | at the steps that generate them, "
          f"{n_emitted} words)")
    for layer in range(n_layers):
        print(f"  layer {layer:2d}: {everywhere[layer]:7.1f} | {at_emission[layer]:7.1f}")
    best, best_emitted = int(np.nanargmin(everywhere)), int(np.nanargmin(at_emission)) if n_emitted else -1
    # the premise: a layer below the last ranks the present words strictly better than the last (ties do not count)
    holds = everywhere[best] < everywhere[-1]
    holds_emitted = n_emitted > 0 and at_emission[best_emitted] < at_emission[-1]
    print(f"  best layer: {best} of 0..{n_layers - 1} (all steps), {best_emitted} (at emission); the premise holds "
          f"when it ranks them strictly better than the last: {holds} / {holds_emitted}")
    hidden, absent, n_hidden = hidden_genuine(ranks, present, generated, words)
    print(f"hidden genuine: present words never generated ({n_hidden}) rank {hidden:.1f} (median, last layer), "
          f"absent words {absent:.1f}", flush=True)

    # Lavender's premise
    scenes = held_out_scenes(args.n_pointing_scenes, size, seed=SEED + 1, task="free-scenes")
    rows, grid, student_seconds, teacher_seconds = pointing_rows(student, teacher, scenes)
    print(f"\n== pointing: {args.n_pointing_scenes} unbiased scenes, colour and shape words of the reference "
          f"captions, on the student's {grid} x {grid} grid (student {student_seconds:.0f} s, teacher "
          f"{teacher_seconds:.0f} s) ==")
    for name, result in rows.items():
        print(f"  {name:38s} all {result['all']:.3f}  colour {result['color']:.3f}  shape {result['shape']:.3f}  "
              f"({result['n_color'] + result['n_shape']} words)")
    margin = rows["teacher"]["all"] - rows["student: mean attention, all layers"]["all"]
    print(f"  teacher - student mean attention: {margin:+.3f} (the issue asks >= +0.15: "
          f"{'met' if margin >= 0.15 else 'not met'})", flush=True)


if __name__ == "__main__":
    main()
