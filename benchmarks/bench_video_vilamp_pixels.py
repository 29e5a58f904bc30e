"""ViLAMP from pixels: rendered videos through the shipped tiny CLIP, on videos that do not flatter the selector.

Five parts; the comparisons print ratios against the named baseline in one run::

    OMP_NUM_THREADS=1 python benchmarks/bench_video_vilamp_pixels.py                 # all
    OMP_NUM_THREADS=1 python benchmarks/bench_video_vilamp_pixels.py --parts stress  # one

``pixels``: ``make_needle_videos`` with several events of the queried colour
(the target is their shape), same-colour distractors and near-duplicate
decoys (``--events``, ``--distractors``, ``--decoys``), embedded by the
natural pipeline: ``CLIPVideoEncoder()`` (the shipped tiny CLIP, 8 x 8
patches, 32-d) on ``(frames, query_prompts)`` pairs, its packed rows read by
the compressors with no layout argument. At ``1 / --reduction`` of the
``n_frames * 64`` patch tokens every keyframe method keeps ``K = (budget -
n_frames) / 63`` keyframes (DKS with the official gap fill, so that it
spends all ``K``; top-``K`` by relevance; ``K`` evenly spaced frames;
``ClusterKeyframeCompressor``, the official KMeans selector), all merged by
the same differential merge; "none" keeps every patch. Event recall (an event
counts when one of its frames is a keyframe), video recall (some event of
the video is), and the held-out accuracy of ``ViLAMPClassifier``
(attention-pool head) on the event shape, mean +- sd over ``--seeds``. The
same data then measure the three defaults that differ from the official
runtime (``fill``, ``min_relevance``, ``keyframe_pool``).

``ceiling``: what the tiny CLIP's embeddings of the true event frames tell of
the shape, on the data of ``pixels``: zero-shot (the captions of each shape
in the query colour) and a logistic regression on the mean event-frame
embedding. No selector can feed the classifier more than this.

``stress``: recall only, the paper's sweep of ``K`` and ``tau`` (0.7-0.95)
against top-``K``, KMeans and uniform on five kinds of videos: three
events each in its own scene, three events across scene cuts, three events
each followed by a near-duplicate decoy, three events and three
distractor scenes, six events (more than the smallest ``K``). Each cell where
DKS loses to top-``K`` is listed. ``mechanisms`` measures why, on the same
data: how often a decoy outranks its event and is taken instead of it, and
how many keyframes distractors take at tau 0.85 and 0.95.

``--clip PATH`` runs ``pixels``, ``ceiling``, ``stress`` and ``mechanisms``
through another CLIP than the shipped tiny one: a weights file of the same
architecture (32-d, 8 x 8 patches), such as the tiny CLIP fine-tuned on
needle-video frames with the objects they show as captions::

    skicml pretrain tiny-clip --data needle-frames --init-from tiny-clip-shapes --steps 600 \\
        --lr 3e-4 --threads 1 --checkpoint run/needle_clip.ckpt --export run/needle_clip.pt
    OMP_NUM_THREADS=1 python benchmarks/bench_video_vilamp_pixels.py --parts ceiling pixels \\
        --clip run/needle_clip.pt

``rotation``: the learnable merge where it should win. ``make_needle_embeddings``
videos whose patches come from "another encoder" than the frames and the
query (a fixed random rotation of the patch space); uniform keyframes, so
the event lives in merged tokens. ``ViLAMPClassifier`` with the parameter-free
merge on the original patches (the ceiling), the parameter-free merge on the
rotated patches, and the learnable merge (the official ``SigPooling``) on
the rotated patches, from the official N(0, 0.02) maps and from maps near
the identity (``merge_init="identity"``); ``--rot-rows`` runs the rows whose
label starts with one of its prefixes (below, the parameter-free rotated row
and both temperature-1 learnable rows, identity init included)::

    OMP_NUM_THREADS=1 python benchmarks/bench_video_vilamp_pixels.py --parts rotation \\
        --rot-rows "parameter-free, rotated" "learnable, rotated, temp. 1"
"""

import argparse
import time

import numpy as np
import torch

from skicml.datasets import make_needle_embeddings, make_needle_videos
from skicml.video import (
    CLIPVideoEncoder,
    ClusterKeyframeCompressor,
    VideoEmbedding,
    ViLAMPClassifier,
    ViLAMPCompressor,
    cluster_keyframes,
)

PATCHES = 64  # the shipped tiny CLIP: 8 x 8 patches


class _ClusterClassifier(ViLAMPClassifier):
    """ViLAMPClassifier whose keyframes are the official KMeans selector's (benchmark only)."""

    def _select(self, videos):
        return [torch.from_numpy(cluster_keyframes(v.frames, v.query, self.max_keyframes, 64, 0)) for v in videos]


def _budget(n_frames, reduction, per_keyframe=PATCHES):
    tokens = n_frames * PATCHES // reduction
    return tokens, max(1, (tokens - n_frames) // (per_keyframe - 1))


CLIP = None  # --clip: a weights file read by CLIPEmbedder(pretrained=...); None is the shipped tiny CLIP


def _encoder(n_frames, pairs):
    embedder = None
    if CLIP is not None:
        from skicml.clip import CLIPEmbedder

        embedder = CLIPEmbedder(pretrained=CLIP, device="cpu")
    encoder = CLIPVideoEncoder(embedder, n_frames=n_frames).fit(pairs[:1])
    if encoder.n_patches_ != PATCHES:  # the token budgets (K) are counted in the tiny CLIP's patches
        raise SystemExit(f"--clip {CLIP} gives {encoder.n_patches_} patches a frame; the benchmark's budgets assume "
                         f"the tiny CLIP's {PATCHES} (8 x 8): use a CLIP of its architecture.")
    if CLIP is not None:
        provenance = encoder.image_embedder_.model_info_.get("provenance") or {}
        print(f"  --clip {CLIP}: {provenance.get('recipe', 'no recipe recorded')} "
              f"({provenance.get('steps', '?')} steps, final loss {provenance.get('final_loss', '?')})", flush=True)
    return encoder


def _embed(encoder, data):
    pairs = list(zip(data.videos, data.query_prompts))
    if encoder is None:
        encoder = _encoder(max(len(v) for v in data.videos), pairs)
    return encoder, encoder.transform(pairs)


def _selectors(k):
    return {
        "DKS": ViLAMPCompressor(max_keyframes=k, fill="gaps", output="selection"),
        "top-K": ViLAMPCompressor(max_keyframes=k, redundancy_threshold=1.0, output="selection"),
        "KMeans": ClusterKeyframeCompressor(max_keyframes=k, output="selection"),
        "uniform": ViLAMPCompressor(max_keyframes=k, selector="uniform", output="selection"),
    }


def _recall(mask, data):
    """Event recall and video recall (some event caught) of 0/1 keyframe masks."""
    events, videos = [], []
    for row, spans in zip(mask, data.events):
        hits = [bool(row[a:b].any()) for a, b in spans]
        events += hits
        videos.append(any(hits))
    return float(np.mean(events)), float(np.mean(videos))


def _fmt(values):
    values = np.asarray(values, dtype=float)
    return f"{values.mean():.3f} +- {values.std():.3f}"


def part_pixels(args):
    n = args.frames
    tokens, k = _budget(n, args.reduction)
    print(f"\nFrom pixels: {args.videos} videos of {n} frames, {args.events} events of 4 frames (class = their "
          f"shape, {args.classes} classes), {args.distractors} distractor scenes, {args.decoys} decoys, "
          f"{args.scenes} scenes, 1 drifting object; CLIP {CLIP or 'tiny-clip-shapes'}; budget {tokens} of {n * PATCHES} tokens (K={k}); "
          f"{args.train} videos train the classifier, the rest test it; seeds {list(range(args.seeds))}")
    methods = ["DKS", "top-K", "KMeans", "uniform", "none"]
    recall = {m: [] for m in methods}
    accuracy = {m: [] for m in methods}
    seconds = {m: [] for m in methods}
    defaults = {}
    encoder = None
    for seed in range(args.seeds):
        start = time.perf_counter()
        data = make_needle_videos(args.videos, n_frames=n, n_scenes=args.scenes, n_objects=1, n_classes=args.classes,
                                  n_events=args.events, n_distractors=args.distractors, n_decoys=args.decoys,
                                  random_state=seed)
        encoder, X = _embed(encoder, data)
        y = data.target
        print(f"  seed {seed}: embedded in {time.perf_counter() - start:.0f} s", flush=True)
        for name, selector in _selectors(k).items():
            recall[name].append(_recall(selector.fit(X).transform(X), data))
        recall["none"].append((1.0, 1.0))
        # What the defaults that differ from the official runtime change (recall and tokens kept).
        for label, params in (("DKS defaults (fill='none')", dict(max_keyframes=k)),
                              ("DKS fill='gaps' (official)", dict(max_keyframes=k, fill="gaps")),
                              ("DKS min_relevance=0.2 (official), fill='gaps'",
                               dict(max_keyframes=k, fill="gaps", min_relevance=0.2)),
                              ("DKS keyframe_pool=2 (official), fill='gaps', same budget",
                               dict(max_keyframes=_budget(n, args.reduction, 16)[1], fill="gaps", keyframe_pool=2))):
            compressor = ViLAMPCompressor(output="selection", **params).fit(X)
            mask = compressor.transform(X)
            kept = np.mean([len(t) for t in compressor.transform_tokens(X)[0]])
            defaults.setdefault(label, []).append((*_recall(mask, data), kept))
        if not args.accuracy:
            continue
        train, test = slice(0, args.train), slice(args.train, None)
        common = dict(d_model=32, n_heads=2, max_epochs=args.epochs, random_state=seed, device="cpu", verbose=0)
        models = {
            "DKS": ViLAMPClassifier(max_keyframes=k, fill="gaps", **common),
            "top-K": ViLAMPClassifier(max_keyframes=k, redundancy_threshold=1.0, **common),
            "KMeans": _ClusterClassifier(max_keyframes=k, **common),
            "uniform": ViLAMPClassifier(max_keyframes=k, selector="uniform", **common),
            "none": ViLAMPClassifier(max_keyframes=n, redundancy_threshold=1.0, **common),
        }
        for name, model in models.items():
            start = time.perf_counter()
            model.fit(X[train], y[train])
            accuracy[name].append(model.score(X[test], y[test]))
            seconds[name].append(time.perf_counter() - start)
        print(f"  seed {seed}: " + ", ".join(f"{m} {accuracy[m][-1]:.2f}" for m in methods), flush=True)

    top = np.mean([r[0] for r in recall["top-K"]])
    print(f"\n{'method':<9} {'event recall':>16} {'video recall':>16} {'/ top-K':>8} {'accuracy':>16} {'fit s':>6}")
    for m in methods:
        events = [r[0] for r in recall[m]]
        acc = _fmt(accuracy[m]) if accuracy[m] else "-"
        fit = f"{np.mean(seconds[m]):.0f}" if seconds[m] else "-"
        print(f"{m:<9} {_fmt(events):>16} {_fmt([r[1] for r in recall[m]]):>16} {np.mean(events) / top:>8.2f} "
              f"{acc:>16} {fit:>6}")
    print(f"(chance accuracy {1 / args.classes:.3f})")
    print(f"\n{'DKS setting':<52} {'event recall':>16} {'video recall':>16} {'tokens kept':>12}")
    for label, rows in defaults.items():
        rows = np.array(rows)
        print(f"{label:<52} {_fmt(rows[:, 0]):>16} {_fmt(rows[:, 1]):>16} {rows[:, 2].mean():>12.0f}")


def part_ceiling(args):
    """What the tiny CLIP's embeddings of the true event frames tell of the shape: the classifier's ceiling."""
    from sklearn.linear_model import LogisticRegression

    print(f"\nCeiling: the shape from the true event frames' CLIP ({CLIP or 'tiny-clip-shapes'}) embeddings, "
          f"the data of 'pixels' "
          f"({args.videos} videos, {args.train} to train), seeds {list(range(args.seeds))}")
    zero_shot, probe = [], []
    encoder = None
    for seed in range(args.seeds):
        data = make_needle_videos(args.videos, n_frames=args.frames, n_scenes=args.scenes, n_objects=1,
                                  n_classes=args.classes, n_events=args.events, n_distractors=args.distractors,
                                  n_decoys=args.decoys, random_state=seed)
        pairs = list(zip(data.videos, data.query_prompts))
        if encoder is None:
            encoder = _encoder(args.frames, pairs)
        features, hits = [], []
        for video, colour, needles, y in zip(data.videos, data.query_colors, data.needle_frames, data.target):
            frames = encoder.image_embedder_.transform(video[needles])
            frames /= np.linalg.norm(frames, axis=1, keepdims=True)
            captions = encoder.text_embedder_.transform(
                [f"a {size} {colour} {shape}" for shape in data.target_names for size in ("small", "large")])
            captions = captions.reshape(len(data.target_names), 2, -1).mean(1)
            captions /= np.linalg.norm(captions, axis=1, keepdims=True)
            hits.append(int(np.argmax((frames @ captions.T).mean(0))) == y)
            features.append(frames.mean(0))
        features = np.array(features)
        zero_shot.append(np.mean(hits[args.train:]))
        model = LogisticRegression(C=10.0, max_iter=2000).fit(features[:args.train], data.target[:args.train])
        probe.append(model.score(features[args.train:], data.target[args.train:]))
    print(f"zero-shot (captions of each shape in the query colour) {_fmt(zero_shot)}; logistic regression on the "
          f"mean event-frame embedding {_fmt(probe)}; chance {1 / args.classes:.3f}")


STRESS = {
    "3 events, own scenes": dict(n_scenes=6, n_events=3),
    "3 events across cuts": dict(n_scenes=6, n_events=3, span_cuts=True),
    "3 events + 3 decoys": dict(n_scenes=6, n_events=3, n_decoys=3),
    "3 events + 3 distractors": dict(n_scenes=6, n_events=3, n_distractors=3),
    "6 events": dict(n_scenes=8, n_events=6),
}


def part_stress(args):
    n = args.stress_frames
    taus = args.taus
    print(f"\nStress: event recall, {args.stress_videos} videos of {n} frames per setting and seed, events of 4 "
          f"frames, 1 drifting object, tiny CLIP; mean +- sd over seeds {list(range(args.seeds))} "
          f"(DKS with the official gap fill)")
    header = "".join(f"{'tau ' + str(t):>15}" for t in taus)
    print(f"{'setting':<26} {'K':>3}{header}{'top-K':>15}{'KMeans':>15}{'uniform':>15}")
    losses = []
    encoder = None
    for label, params in STRESS.items():
        scores = {}
        for seed in range(args.seeds):
            data = make_needle_videos(args.stress_videos, n_frames=n, n_objects=1, n_classes=3, random_state=seed,
                                      **params)
            encoder, X = _embed(encoder, data)
            for k in args.stress_k:
                for tau in taus:
                    selector = ViLAMPCompressor(max_keyframes=k, redundancy_threshold=tau, fill="gaps",
                                                output="selection")
                    scores.setdefault((k, tau), []).append(_recall(selector.fit(X).transform(X), data)[0])
                for name in ("top-K", "KMeans", "uniform"):
                    selector = _selectors(k)[name]
                    scores.setdefault((k, name), []).append(_recall(selector.fit(X).transform(X), data)[0])
        for k in args.stress_k:
            cells = [scores[(k, tau)] for tau in taus] + [scores[(k, m)] for m in ("top-K", "KMeans", "uniform")]
            print(f"{label:<26} {k:>3}" + "".join(f"{_fmt(c):>15}" for c in cells), flush=True)
            top = np.mean(scores[(k, "top-K")])
            for tau in taus:
                if np.mean(scores[(k, tau)]) < top:
                    losses.append(f"{label}, K={k}, tau={tau}: {np.mean(scores[(k, tau)]):.3f} < top-K {top:.3f}")
    print("\nWhere DKS loses to top-K:" + ("".join(f"\n  {line}" for line in losses) if losses else " nowhere"))


def part_mechanisms(args):
    """Why DKS loses where the stress table says: decoys that suppress their event, distractors at a high tau."""
    n = args.stress_frames
    print(f"\nMechanisms: {args.stress_videos} videos of {n} frames per seed, the stress part's data")
    encoder = None
    for seed in range(args.seeds):
        data = make_needle_videos(args.stress_videos, n_frames=n, n_objects=1, n_classes=3, random_state=seed,
                                  **STRESS["3 events + 3 decoys"])
        encoder, X = _embed(encoder, data)
        videos = encoder.transform_videos(list(zip(data.videos, data.query_prompts)))
        dks = ViLAMPCompressor(max_keyframes=17, fill="gaps", output="selection").fit(X).transform(X)
        kmeans = ClusterKeyframeCompressor(max_keyframes=17, output="selection").fit(X).transform(X)
        events = outranked = missed = decoy_taken = both = 0
        closest = []
        for row, km_row, video, spans in zip(dks, kmeans, videos, data.events):
            units = video.frames / np.linalg.norm(video.frames, axis=1, keepdims=True)
            relevance = units @ (video.query / np.linalg.norm(video.query))
            for a, b in spans:
                decoy = np.arange(b, b + (b - a))
                events += 1
                closest.append((units[a:b] @ units[decoy].T).max())
                outranked += relevance[decoy].max() > relevance[a:b].max()
                if not row[a:b].any():
                    missed += 1
                    decoy_taken += bool(row[decoy].any())
                both += bool(km_row[a:b].any() and km_row[decoy].any())
        print(f"  seed {seed}, decoys, K=17, tau 0.85: {events} events, decoy more relevant than its event "
              f"{outranked}, missed by DKS {missed} (their decoy taken: {decoy_taken}); closest event-decoy cosine, median "
              f"{np.median(closest):.3f}; KMeans took event and decoy {both}")
        data = make_needle_videos(args.stress_videos, n_frames=n, n_objects=1, n_classes=3, random_state=seed,
                                  **STRESS["3 events + 3 distractors"])
        encoder, X = _embed(encoder, data)
        for tau in (0.85, 0.95):
            mask = ViLAMPCompressor(max_keyframes=8, redundancy_threshold=tau, output="selection").fit(X).transform(X)
            on = np.mean([row[frames].sum() for row, frames in zip(mask, data.distractor_frames)])
            print(f"  seed {seed}, distractors, K=8, tau {tau}: greedy keyframes per video {mask.sum(1).mean():.2f}, "
                  f"on distractor frames {on:.2f}")
        if seed == 0:
            data = make_needle_videos(6, n_frames=n, n_objects=1, n_classes=3, random_state=0,
                                      **STRESS["3 events, own scenes"])
            cross, within = [], []
            for video, scenes in zip(encoder.transform_videos(list(zip(data.videos, data.query_prompts))),
                                     data.scene_index):
                units = video.frames / np.linalg.norm(video.frames, axis=1, keepdims=True)
                similarity = units @ units.T
                same = scenes[:, None] == scenes[None, :]
                cross.append(similarity[~same])
                within.append(similarity[same & ~np.eye(len(scenes), dtype=bool)])
            cross, within = np.concatenate(cross), np.concatenate(within)
            print(f"  frame pairs (6 videos, seed 0): across scenes median {np.median(cross):.3f}, above 0.7 "
                  f"{(cross > 0.7).mean():.3f}, above 0.85 {(cross > 0.85).mean():.3f}; within a scene median "
                  f"{np.median(within):.3f}, above 0.85 {(within > 0.85).mean():.3f}, above 0.95 "
                  f"{(within > 0.95).mean():.3f}")


def part_rotation(args):
    print(f"\nLearnable merge, patches from another encoder: make_needle_embeddings, {args.rot_videos} videos of "
          f"{args.rot_frames} frames x 16 patches, dim 16, 4 classes, one needle of 2-4 frames, patches (not frames "
          f"or query) rotated by a fixed random orthogonal matrix; {args.rot_k} uniform keyframes; 75% train; "
          f"ViLAMPClassifier attention pool, {args.rot_epochs} epochs; seeds {list(range(args.seeds))}")
    rows = {"parameter-free, original patches": [], "parameter-free, rotated": [], "learnable, rotated": [],
            f"learnable, rotated, temp. {args.rot_temperature:g}": [],
            f"learnable, rotated, temp. {args.rot_temperature:g}, identity init": []}
    for seed in range(args.seeds):
        data = make_needle_embeddings(args.rot_videos, n_frames=args.rot_frames, n_patches=16, dim=16, n_classes=4,
                                      needle_len=(2, 4), random_state=200 + seed)
        rotation, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((16, 16)))
        rotation = rotation.astype(np.float32)
        plain = [VideoEmbedding(f, q, p) for f, q, p in zip(data.frames, data.queries, data.patches)]
        rotated = [VideoEmbedding(f, q, p @ rotation) for f, q, p in zip(data.frames, data.queries, data.patches)]
        split = int(0.75 * len(plain))
        for label, videos, learnable, temperature, init in (
                ("parameter-free, original patches", plain, False, 0.01, "normal"),
                ("parameter-free, rotated", rotated, False, 0.01, "normal"),
                ("learnable, rotated", rotated, True, 0.01, "normal"),
                (f"learnable, rotated, temp. {args.rot_temperature:g}", rotated, True, args.rot_temperature, "normal"),
                (f"learnable, rotated, temp. {args.rot_temperature:g}, identity init", rotated, True,
                 args.rot_temperature, "identity")):
            if args.rot_rows and not label.startswith(tuple(args.rot_rows)):
                continue
            model = ViLAMPClassifier(max_keyframes=args.rot_k, selector="uniform", learnable_merge=learnable,
                                     merge_temperature=temperature, merge_init=init, d_model=32, n_heads=2,
                                     max_epochs=args.rot_epochs, random_state=seed, device="cpu", verbose=0)
            model.fit(videos[:split], data.target[:split])
            rows[label].append(model.score(videos[split:], data.target[split:]))
        print(f"  seed {seed}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in rows.items() if v), flush=True)
    rows = {label: values for label, values in rows.items() if values}
    base = np.mean(rows["parameter-free, rotated"]) if "parameter-free, rotated" in rows else np.nan
    print(f"{'merge':<52} {'accuracy':>16} {'/ parameter-free rotated':>25}")
    for label, values in rows.items():
        ratio = f"{np.mean(values) / base:.2f}" if base > 0 else "-"  # no ratio to a zero (or absent) base
        print(f"{label:<52} {_fmt(values):>16} {ratio:>25}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=["pixels", "ceiling", "stress", "mechanisms", "rotation"],
                        choices=["pixels", "ceiling", "stress", "mechanisms", "rotation"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--reduction", type=int, default=10)
    parser.add_argument("--videos", type=int, default=120)
    parser.add_argument("--train", type=int, default=80)
    parser.add_argument("--frames", type=int, default=240)
    parser.add_argument("--scenes", type=int, default=6)
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--events", type=int, default=3)
    parser.add_argument("--distractors", type=int, default=2)
    parser.add_argument("--decoys", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--no-accuracy", dest="accuracy", action="store_false")
    parser.add_argument("--stress-frames", type=int, default=200)
    parser.add_argument("--stress-videos", type=int, default=20)
    parser.add_argument("--stress-k", type=int, nargs="+", default=[2, 4, 8, 17])
    parser.add_argument("--taus", type=float, nargs="+", default=[0.7, 0.8, 0.85, 0.9, 0.95])
    parser.add_argument("--rot-videos", type=int, default=160)
    parser.add_argument("--rot-frames", type=int, default=120)
    parser.add_argument("--rot-k", type=int, default=4)
    parser.add_argument("--rot-epochs", type=int, default=30)
    parser.add_argument("--rot-temperature", type=float, default=1.0,
                        help="initial merge temperature of the last learnable row (the official 0.01 in the other)")
    parser.add_argument("--rot-rows", nargs="+", default=None,
                        help="run only the rotation rows whose label starts with one of these (e.g. 'parameter-free, "
                             "rotated' 'learnable, rotated, temp. 1, identity'); default all")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clip", default=None,
                        help="CLIP weights file (or shipped name) for the pixel parts; default the shipped tiny CLIP")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    global CLIP
    CLIP = args.clip
    for part in args.parts:
        {"pixels": part_pixels, "ceiling": part_ceiling, "stress": part_stress, "mechanisms": part_mechanisms,
         "rotation": part_rotation}[part](args)


if __name__ == "__main__":
    main()
