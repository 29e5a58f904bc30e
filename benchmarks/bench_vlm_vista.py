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
"""

import argparse
import time

import numpy as np
import pandas as pd
import torch

from skicml.datasets import make_object_scenes
from skicml.vlm import VISTASteerer


def scenes(n, cooccurrence, seed):
    images, _, objects = make_object_scenes(n, cooccurrence=cooccurrence, random_state=seed)
    truth = objects.groupby("scene")["name"].apply(set).reindex(range(n)).tolist()
    return images, truth


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
    args = parser.parse_args()
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
