"""VISTA on the shipped TinyVLM: hallucination (CHAIR) and cost against plain decoding.

The calibration task is :func:`skicml.datasets.make_object_scenes`: 3-7
objects a scene, 20-60 word captions, and a co-occurrence bias in training
(each class pulls its partner in with probability 0.8). The test scenes are
fresh, drawn with the training bias ("biased", in distribution) or without
it ("unbiased", where the learnt partners are hallucinations waiting to
happen). CHAIR counts colour-shape objects (24 classes); lower CHAIR_S /
CHAIR_I is better, higher recall is better.

Rows: plain decoding; VSV only across ``vsv_lambda`` at both sites; SLA
only across ``sla_gamma``; VISTA (both) at the grid's best point; each in
greedy, beam (5) and nucleus (0.9) decoding. Then the strength at which
captions collapse (official issue #2), and the cost per generated token
against plain decoding (VISTA's target: under 1.3x).

    python benchmarks/bench_vlm_vista.py              # the recorded run
    python benchmarks/bench_vlm_vista.py --quick      # smoke test

``--task free-scenes`` measures VISTA on the testbed of issue 58
(:func:`skicml.datasets.make_free_object_scenes`: objects off the token
grid, captions of 100+ tokens) with a student trained on it (``--student``:
an exported file or a ``skicml pretrain tiny-vlm --task free-scenes``
checkpoint, read as ``bench_vlm_testbed.py`` reads it). For each seed (fresh
validation and test scenes, and the seed of nucleus sampling):

- ``vsv_lambda`` and ``sla_gamma`` are chosen together by scikit-learn's
  ``GridSearchCV`` over :meth:`~skicml.vlm.VISTASteerer.score` (-CHAIR_I of
  greedy captions; ``--scoring`` for another) with ``--cv`` folds of
  ``--val-scenes`` unbiased held-out scenes;
- plain decoding and VISTA at the chosen point caption the test scenes
  (unbiased; biased: drawn with the training co-occurrences) in greedy, beam
  (5) and nucleus (0.9) decoding: CHAIR_S, CHAIR_I, recall;
- POPE's yes/no probe on the same scenes (:func:`skicml.vlm.pope_questions`:
  3 present and 3 absent objects an image; absent ones at random, the most
  frequent, or those co-occurring most with the present ones, counted on
  biased scenes as the student was trained), answered from each arm's
  captions (:func:`skicml.vlm.caption_answers`: yes when the caption names
  the object; the TinyVLM student is a captioner with no yes/no answers):
  accuracy and F1.

The summary gives mean +- sd over seeds and the paired differences VISTA -
plain seed by seed::

    python benchmarks/bench_vlm_vista.py --task free-scenes --student free_student_vlm.pt --seeds 0 1 2
    python benchmarks/bench_vlm_vista.py --task free-scenes --quick     # smoke test, tiny untrained student
"""

import argparse
import time
import warnings

import numpy as np
import pandas as pd
import torch

from bench_vlm_testbed import check_student, load_student, mean_sd, paired_differences, tiny_student, truth_sets
from sklearn.model_selection import GridSearchCV, KFold

from skicml.datasets import object_classes
from skicml.vlm import VISTASteerer, caption_answers, chair, pope_questions, pope_score
from skicml.vlm._pretrain import MAX_NEW_TOKENS, task_scenes
from skicml.vlm._vista._steerer import _SCORINGS

#: POPE's three negative samplings.
SAMPLINGS = ("random", "popular", "adversarial")
#: Seeds of the free-scenes sets: validation, unbiased and biased test scenes, the POPE statistics (+ 10 x seed).
FREE_SEEDS = {"validation": 5900, "unbiased": 5901, "biased": 5902, "statistics": 5903}


def scenes(n, cooccurrence, seed, task="object-scenes", image_size=48):
    images, _, objects = task_scenes(task, n, cooccurrence=cooccurrence, random_state=seed, image_size=image_size)
    return images, truth_sets(objects, n)


def evaluate(backbone, images, truth, **params):
    model = VISTASteerer(backbone=backbone, batch_size=100, random_state=0, **params).fit()
    start = time.perf_counter()
    report = model.chair_report(images, truth)
    seconds = time.perf_counter() - start
    empty = float(np.mean([not c for c in model.predict(images[:50])])) if params.get("vsv_lambda", 0) > 0.5 \
        else np.nan
    return {**{k: report[k] for k in ("chair_s", "chair_i", "recall", "f1", "mean_length")}, "seconds": seconds,
            "empty_share": empty}


def configs(lambdas, gammas):
    yield "plain", dict(vsv=False, sla=False)
    for site in ("mlp_output", "residual"):
        for lam in lambdas:
            yield f"vsv {site} lambda={lam}", dict(sla=False, vsv_lambda=lam, vsv_site=site)
    for gamma in gammas:
        yield f"sla gamma={gamma}", dict(vsv=False, sla_gamma=gamma)


def token_cost(backbone, images, repeats, max_new_tokens):
    """Seconds per generated token (batch of len(images)), plain against VISTA, median of ``repeats``."""
    settings = {"plain": dict(vsv=False, sla=False), "vsv": dict(sla=False), "sla": dict(vsv=False),
                "vista": dict()}
    times = {name: [] for name in settings}
    models = {name: VISTASteerer(backbone=backbone, max_new_tokens=max_new_tokens, batch_size=len(images),
                                 vsv_lambda=0.1, **params).fit() for name, params in settings.items()}
    tokens = {}
    for _ in range(repeats):
        for name, model in models.items():
            start = time.perf_counter()
            ids = model._generate_ids(*model._read(images, reset=False))
            times[name].append(time.perf_counter() - start)
            tokens[name] = max(1, sum(len(row) for row in ids))
    return {name: float(np.median(t)) / tokens[name] for name, t in times.items()}


def decoding_options(decoding):
    return dict(decoding=decoding, num_beams=5) if decoding == "beam" else dict(decoding=decoding)


def choose(student, images, truth, args, seed):
    """``GridSearchCV`` over the steerer's ``score`` on held-out scenes: the chosen (lambda, gamma) and the grid."""
    steerer = VISTASteerer(backbone=student, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size,
                           sla_window=args.sla_window, vocabulary=object_classes(), scoring=args.scoring,
                           random_state=seed)
    search = GridSearchCV(steerer, {"vsv_lambda": args.lambdas, "sla_gamma": args.gammas},
                          cv=KFold(args.cv, shuffle=True, random_state=seed), refit=False, error_score="raise")
    with warnings.catch_warnings():  # a collapsing point shows in its score; its warnings would drown the log
        warnings.filterwarnings("ignore", message=".*steers this model too hard", category=UserWarning)
        search.fit(images, truth)
    grid = pd.DataFrame(search.cv_results_["params"])
    grid["score"], grid["score_sd"] = search.cv_results_["mean_test_score"], search.cv_results_["std_test_score"]
    return search.best_params_, grid


def caption_rows(steerer, images, truth, questions):
    """CHAIR and POPE (answered from the captions) of one steerer's captions of a test set."""
    start = time.perf_counter()
    captions = list(steerer.predict(images))
    seconds = time.perf_counter() - start
    report = chair(captions, truth, object_classes())
    row = {k: report[k] for k in ("chair_s", "chair_i", "recall", "f1", "mean_length")}
    for sampling, asked in questions.items():
        scores = pope_score(caption_answers(captions, asked, object_classes()), asked["label"])
        row.update({f"pope_{sampling[:3]}_{k}": scores[k] for k in ("accuracy", "f1", "yes_ratio")})
    return {**row, "seconds": seconds}


def free_scenes(args):
    """VISTA against plain decoding on the free-scenes testbed, ``--seeds`` times (module docstring)."""
    student = tiny_student() if args.quick else check_student(load_student(args.student))
    size = student.image_size
    print(f"student: {sum(p.numel() for p in student.parameters()):,} parameters, {student.n_image_tokens} image "
          f"tokens, {len(student.layers)} layers; grid lambda {args.lambdas} x gamma {args.gammas}, {args.cv}-fold "
          f"GridSearchCV on {args.val_scenes} scenes, scoring {args.scoring}", flush=True)
    rows, grids = [], []
    for seed in args.seeds:
        shift = 10 * seed
        validation = scenes(args.val_scenes, 0.0, FREE_SEEDS["validation"] + shift, "free-scenes", size)
        start = time.perf_counter()
        best, grid = choose(student, *validation, args, seed)
        grids.append(grid.assign(seed=seed))
        print(f"seed {seed}: GridSearchCV chose {best} ({time.perf_counter() - start:.0f} s)", flush=True)
        _, statistics = scenes(args.statistics_scenes, args.cooccurrence, FREE_SEEDS["statistics"] + shift,
                               "free-scenes", size)
        for test in args.tests:
            images, truth = scenes(args.n_scenes, args.cooccurrence if test == "biased" else 0.0,
                                   FREE_SEEDS[test] + shift, "free-scenes", size)
            questions = {sampling: pope_questions(truth, object_classes(), sampling=sampling, statistics=statistics,
                                                  random_state=seed) for sampling in SAMPLINGS}
            for decoding in args.decodings:
                for arm, params in (("plain", dict(vsv=False, sla=False)), ("vista", best)):
                    steerer = VISTASteerer(backbone=student, max_new_tokens=args.max_new_tokens,
                                           batch_size=args.batch_size, sla_window=args.sla_window,
                                           random_state=seed, **decoding_options(decoding), **params).fit()
                    row = caption_rows(steerer, images, truth, questions)
                    rows.append({"seed": seed, "test": test, "decoding": decoding, "arm": arm,
                                 "vsv_lambda": params.get("vsv_lambda", 0.0),
                                 "sla_gamma": params.get("sla_gamma", 0.0), **row})
                    print(f"seed {seed} {test:8s} {decoding:8s} {arm:6s} CHAIR_S {row['chair_s']:.3f} CHAIR_I "
                          f"{row['chair_i']:.3f} recall {row['recall']:.3f} POPE acc/F1 " + " ".join(
                              f"{s[:3]} {row[f'pope_{s[:3]}_accuracy']:.3f}/{row[f'pope_{s[:3]}_f1']:.3f}"
                              for s in SAMPLINGS) + f" ({row['seconds']:.0f} s)", flush=True)
    table = pd.DataFrame(rows)
    grid = pd.concat(grids).groupby(["vsv_lambda", "sla_gamma"]).score.agg(["mean", "std"])
    print(f"\nGridSearchCV: mean {args.scoring} score (greater is better) over seeds, per point")
    print(grid.round(4).to_string())
    keys = ["test", "decoding", "arm"]
    columns = ["chair_s", "chair_i", "recall", "mean_length"] + [
        f"pope_{s[:3]}_{k}" for s in SAMPLINGS for k in ("accuracy", "f1")]
    print(f"\nVISTA on the free-scenes testbed: {args.n_scenes} test scenes a set, seeds {args.seeds}; "
          "mean +- sd over seeds (POPE answered from the captions)")
    with pd.option_context("display.width", 300, "display.max_columns", 40):
        print(mean_sd(table, keys, columns).to_string())
    print("chosen (vsv_lambda, sla_gamma) per seed:",
          table[table.arm == "vista"].groupby("seed")[["vsv_lambda", "sla_gamma"]].first().to_dict("index"))
    for line in paired_differences(table, keys, "vista", "plain", columns):
        print(line)
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="tiny-vlm-scenes", help="a shipped name or a TinyVLM file")
    parser.add_argument("--n-scenes", type=int, default=300)
    parser.add_argument("--lambdas", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.4])
    parser.add_argument("--gammas", type=float, nargs="+", default=[0.1, 0.3, 0.5])
    parser.add_argument("--decodings", nargs="+", default=["greedy", "beam", "nucleus"])
    parser.add_argument("--collapse-lambdas", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    free = parser.add_argument_group("--task free-scenes (issue 58)")
    free.add_argument("--task", choices=["object-scenes", "free-scenes"], default="object-scenes")
    free.add_argument("--student", help="TinyVLM file or `skicml pretrain tiny-vlm --task free-scenes` checkpoint")
    free.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    free.add_argument("--val-scenes", type=int, default=150, help="held-out scenes of the grid search")
    free.add_argument("--cv", type=int, default=3, help="folds of the grid search")
    free.add_argument("--scoring", choices=sorted(_SCORINGS), default="chair_i", help="what score() returns")
    free.add_argument("--tests", nargs="+", choices=["unbiased", "biased"], default=["unbiased", "biased"])
    free.add_argument("--cooccurrence", type=float, default=0.8, help="bias of the biased scenes (training's)")
    free.add_argument("--statistics-scenes", type=int, default=2000,
                      help="biased scenes that rank POPE's popular and adversarial negatives")
    free.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS["free-scenes"])
    free.add_argument("--sla-window", type=int, default=5)
    free.add_argument("--batch-size", type=int, default=50)
    args = parser.parse_args()
    if args.task == "free-scenes":
        if args.quick:
            args.seeds, args.val_scenes, args.cv, args.n_scenes = args.seeds[:2], 8, 2, 8
            args.lambdas, args.gammas = [0.1], [0.3, 0.5]  # every decoding, as the recorded run
            args.tests, args.statistics_scenes, args.max_new_tokens, args.sla_window = ["unbiased"], 100, 24, 2
        elif not args.student:
            parser.error("--task free-scenes needs --student (or --quick)")
        torch.set_num_threads(args.threads)
        free_scenes(args)
        return
    if args.quick:
        args.n_scenes, args.lambdas, args.gammas, args.decodings = 20, [0.1], [0.3], ["greedy"]
        args.collapse_lambdas = [2.0]
    torch.set_num_threads(args.threads)

    test_sets = {"unbiased": scenes(args.n_scenes, 0.0, 9001), "biased": scenes(args.n_scenes, 0.8, 9002)}
    rows = []

    def record(name, decoding, test, **params):
        extra = dict(num_beams=5) if decoding == "beam" else {}
        result = evaluate(args.backbone, *test_sets[test], decoding=decoding, **extra, **params)
        rows.append({"decoding": decoding, "test": test, "config": name, **result})
        print(f"{decoding:8s} {test:9s} {name:32s} CHAIR_S {result['chair_s']:.3f} CHAIR_I {result['chair_i']:.3f} "
              f"recall {result['recall']:.3f} ({result['seconds']:.0f} s)", flush=True)

    # The grid on greedy decoding, unbiased scenes: VSV alone and SLA alone.
    for name, params in configs(args.lambdas, args.gammas):
        record(name, "greedy", "unbiased", **params)
    grid = pd.DataFrame(rows)
    best_vsv = grid[grid.config.str.startswith("vsv")].sort_values("chair_i").iloc[0]
    best_sla = grid[grid.config.str.startswith("sla")].sort_values("chair_i").iloc[0]
    lam = float(best_vsv.config.split("=")[1])
    site = best_vsv.config.split()[1]
    gamma = float(best_sla.config.split("=")[1])
    print(f"best VSV on the grid: {best_vsv.config}; best SLA: {best_sla.config}", flush=True)
    chosen = {"plain": dict(vsv=False, sla=False),
              f"vsv only ({site}, {lam})": dict(sla=False, vsv_lambda=lam, vsv_site=site),
              f"sla only ({gamma})": dict(vsv=False, sla_gamma=gamma),
              f"vista ({site}, {lam}, {gamma})": dict(vsv_lambda=lam, vsv_site=site, sla_gamma=gamma),
              "vista paper defaults (mlp, 0.1, 0.3)": dict(vsv_lambda=0.1, sla_gamma=0.3)}
    for decoding in args.decodings:
        for test in ("unbiased", "biased"):
            for name, params in chosen.items():
                if decoding == "greedy" and test == "unbiased" and name == "plain":
                    continue
                record(name, decoding, test, **params)
    for lam_big in args.collapse_lambdas:
        for site_big in ("mlp_output", "residual"):
            record(f"collapse {site_big} lambda={lam_big}", "greedy", "unbiased", sla=False, vsv_lambda=lam_big,
                   vsv_site=site_big)

    table = pd.DataFrame(rows)
    print()
    print(f"VISTA on {args.backbone}, {args.n_scenes} test scenes per set, {args.threads} thread(s)")
    print(table.drop(columns=["seconds"]).round(3).to_string(index=False))
    plain = table[table.config == "plain"].set_index(["decoding", "test"])["chair_i"]
    for (decoding, test), base in plain.items():
        block = table[(table.decoding == decoding) & (table.test == test) & table.config.str.startswith("vista (")]
        for _, row in block.iterrows():
            ratio = row.chair_i / base if base else float("nan")
            print(f"{decoding} {test}: {row.config} / plain CHAIR_I ratio {ratio:.3f} "
                  f"({row.chair_i:.3f} vs {base:.3f}); recall {row.recall:.3f} vs "
                  f"{table[(table.decoding == decoding) & (table.test == test) & (table.config == 'plain')].recall.iloc[0]:.3f}")

    cost_images = test_sets["unbiased"][0][:1]
    for batch, images in (("batch 1", cost_images), ("batch 16", test_sets["unbiased"][0][:16])):
        cost = token_cost(args.backbone, images, 3 if args.quick else 7, 60)
        print(f"cost per generated token, {batch}: " + ", ".join(
            f"{name} {1e3 * seconds:.2f} ms ({seconds / cost['plain']:.2f}x plain)" for name, seconds in cost.items()))


if __name__ == "__main__":
    main()
