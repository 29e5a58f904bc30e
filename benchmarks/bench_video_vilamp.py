"""ViLAMP on planted long videos: event recall, downstream accuracy, compression time.

Three parts, each printing ratios against the named baselines in one run::

    python benchmarks/bench_video_vilamp.py                 # all three
    python benchmarks/bench_video_vilamp.py --parts recall  # one

``recall``: videos of ``make_needle_embeddings`` with many query-relevant
events of unequal length and strength (``--events`` of 2-10 frames per
1,000 frames, each in its own scene, 2-6 of the 49 patches carrying the
query), 49 patches per frame. At a budget of ``1 / --reduction`` of the
``n_frames * 49`` patch tokens, every method keeps the same number of tokens:
``K = (budget - n_frames) / 48`` keyframes for the keyframe methods (DKS with
the official gap fill, so it uses all K; plain top-K by relevance; K evenly
spaced frames), and the ``budget`` most query-relevant patch tokens for
relevance-only token pruning. An event is recalled when one of its frames is
a keyframe (or keeps a token).

``accuracy``: :class:`ViLAMPClassifier` (attention-pool head) on the needle
class at the same budget, DKS + differential merge against uniform keyframes
+ mean merge, top-K + differential merge, and the uncompressed sequence
(every frame a keyframe, all ``n_frames * M`` tokens), over seeds.

``speed``: compressing one video of 1,000 / 10,000 frames x 49 patches x
512-d (float32, 32 keyframes): :class:`ViLAMPCompressor` (vectorised DKS +
the fused ``skicml::differential_merge``) against the official code's
structure (a dense N x N similarity matrix, a loop over frames for DKS, then
per-frame normalise / two cosines / softmax / weighted sum), with the peak
memory each adds.
"""

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F

from skicml.datasets import make_needle_embeddings
from skicml.video import VideoEmbedding, ViLAMPClassifier, ViLAMPCompressor, select_keyframes


def _budget(n_frames, n_patches, reduction):
    tokens = n_frames * n_patches // reduction
    keyframes = max(1, (tokens - n_frames) // (n_patches - 1))
    return tokens, keyframes


def _recall(keyframes, events):
    chosen = set(np.asarray(keyframes).tolist())
    return [any(f in chosen for f in range(start, stop)) for start, stop in events]


def _pruned_frames(video, tokens):
    """Frames that keep a token when the ``tokens`` most query-relevant patches are kept."""
    patches = F.normalize(torch.from_numpy(video.patches), dim=-1)
    relevance = patches @ F.normalize(torch.from_numpy(video.query), dim=0)
    top = torch.topk(relevance.flatten(), tokens).indices
    return torch.unique(top // video.patches.shape[1]).numpy()


def part_recall(args):
    print(f"\nEvent recall at 1/{args.reduction} of the patch tokens (49 patches, dim {args.dim}, "
          f"{args.events} events of 2-10 frames per 1,000 frames, {args.videos} videos, seed {args.seed})")
    print(f"{'frames':>7} {'K':>5} {'DKS':>6} {'top-K':>6} {'uniform':>8} {'pruning':>8} {'DKS/top-K':>10}")
    for n_frames in args.frames:
        tokens, k = _budget(n_frames, 49, args.reduction)
        events = args.events * n_frames // 1000
        data = make_needle_embeddings(
            args.videos, n_frames=n_frames, n_patches=49, dim=args.dim, n_classes=4, n_scenes=2 * events,
            n_needles=events, needle_len=(2, 10), salient_patches=(2, 6), random_state=args.seed)
        videos = [VideoEmbedding(f, q, p) for f, q, p in zip(data.frames, data.queries, data.patches)]
        scores = {name: [] for name in ("dks", "topk", "uniform", "pruning")}
        for method, params in (("dks", dict(fill="gaps")), ("topk", dict(redundancy_threshold=1.0)),
                               ("uniform", dict(selector="uniform"))):
            compressor = ViLAMPCompressor(max_keyframes=k, **params).fit(videos)
            for chosen, events in zip(compressor.get_selection(videos), data.events):
                scores[method] += _recall(chosen, events)
        for video, events in zip(videos, data.events):
            scores["pruning"] += _recall(_pruned_frames(video, tokens), events)
        mean = {name: float(np.mean(v)) for name, v in scores.items()}
        print(f"{n_frames:>7} {k:>5} {mean['dks']:>6.3f} {mean['topk']:>6.3f} {mean['uniform']:>8.3f} "
              f"{mean['pruning']:>8.3f} {mean['dks'] / max(mean['topk'], 1e-9):>10.2f}")


def part_accuracy(args):
    n_frames, n_patches = args.accuracy_frames, 16
    tokens, k = _budget(n_frames, n_patches, args.reduction)
    print(f"\nViLAMPClassifier accuracy, {n_frames} frames x {n_patches} patches, budget {tokens} tokens "
          f"(K={k}), {args.accuracy_videos} videos (75% train), 4 classes, one needle of 2-4 frames")
    methods = {
        "DKS + DFM": dict(max_keyframes=k, fill="gaps"),
        "top-K + DFM": dict(max_keyframes=k, redundancy_threshold=1.0),
        "uniform + mean": dict(max_keyframes=k, selector="uniform", merge_temperature=1e6),
        "uncompressed": dict(max_keyframes=n_frames, redundancy_threshold=1.0),
    }
    results = {name: [] for name in methods}
    for seed in range(args.seeds):
        data = make_needle_embeddings(args.accuracy_videos, n_frames=n_frames, n_patches=n_patches, dim=args.dim,
                                      n_classes=4, needle_len=(2, 4), random_state=100 + seed)
        videos = [VideoEmbedding(f, q, p) for f, q, p in zip(data.frames, data.queries, data.patches)]
        split = int(0.75 * len(videos))
        for name, params in methods.items():
            start = time.perf_counter()
            model = ViLAMPClassifier(d_model=32, n_heads=2, random_state=seed, device="cpu", **params)
            model.fit(videos[:split], data.target[:split])
            results[name].append((model.score(videos[split:], data.target[split:]), time.perf_counter() - start))
    full = np.mean([a for a, _ in results["uncompressed"]])
    print(f"{'method':<16} {'accuracy':>9} {'std':>6} {'- uncompressed':>15} {'fit s':>7}")
    for name, rows in results.items():
        accuracy = np.array([a for a, _ in rows])
        print(f"{name:<16} {accuracy.mean():>9.3f} {accuracy.std():>6.3f} {accuracy.mean() - full:>+15.3f} "
              f"{np.mean([t for _, t in rows]):>7.1f}")


def _official_like(frames, patches, query, k, threshold):
    """The official code's structure: dense similarities, a loop over frames, per-frame pooling."""
    units = F.normalize(frames, dim=1)
    similarity = units @ units.T  # N x N
    relevance = units @ F.normalize(query, dim=0)
    visited = torch.zeros(len(frames), dtype=torch.bool)
    chosen = []
    for index in torch.argsort(relevance, descending=True, stable=True).tolist():
        if len(chosen) >= k:
            break
        if visited[index]:
            continue
        chosen.append(index)
        visited[index] = True
        visited |= similarity[index] > threshold
    chosen.sort()
    tokens = []
    q = F.normalize(query, dim=0)
    for n in range(len(frames)):
        if n in chosen:
            continue
        reference = max([c for c in chosen if c <= n] or [chosen[0]])
        p = patches[n]
        score = F.normalize(p, dim=1) @ q - (F.normalize(p, dim=1) * F.normalize(patches[reference], dim=1)).sum(1)
        weights = torch.softmax(score / 0.01, dim=0)
        tokens.append(weights @ p)
    return chosen, torch.stack(tokens)


def part_speed(args):
    torch.set_num_threads(args.threads)
    print(f"\nCompressing one video, 49 patches x 512-d float32, K=32, {args.threads} threads (median of 3)")
    print(f"{'frames':>7} {'skicml s':>9} {'official-like s':>16} {'ratio':>7}")
    for n_frames in args.speed_frames:
        g = torch.Generator().manual_seed(0)
        patches = torch.randn(n_frames, 49, 512, generator=g)
        frames = patches.mean(1)
        query = torch.randn(512, generator=g)
        video = [VideoEmbedding(frames.numpy(), query.numpy(), patches.numpy())]
        compressor = ViLAMPCompressor().fit(video)
        ours = []
        for _ in range(3):
            start = time.perf_counter()
            compressor.transform_tokens(video)
            ours.append(time.perf_counter() - start)
        theirs = []
        for _ in range(1 if n_frames > 2000 else 3):
            start = time.perf_counter()
            official_keys, official_tokens = _official_like(frames, patches, query, 32, 0.85)
            theirs.append(time.perf_counter() - start)
        # Same keyframes and the same merged tokens as the official structure.
        tokens, types = compressor.transform_tokens(video)
        assert select_keyframes(frames, query).tolist() == official_keys
        torch.testing.assert_close(tokens[0][types[0] == 0], official_tokens, atol=1e-4, rtol=1e-4)
        ours_s, theirs_s = float(np.median(ours)), float(np.median(theirs))
        print(f"{n_frames:>7} {ours_s:>9.3f} {theirs_s:>16.3f} {theirs_s / ours_s:>7.1f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=["recall", "accuracy", "speed"],
                        choices=["recall", "accuracy", "speed"])
    parser.add_argument("--frames", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--reduction", type=int, default=10)
    parser.add_argument("--events", type=int, default=24)
    parser.add_argument("--videos", type=int, default=10)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--accuracy-frames", type=int, default=500)
    parser.add_argument("--accuracy-videos", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--speed-frames", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for part in args.parts:
        {"recall": part_recall, "accuracy": part_accuracy, "speed": part_speed}[part](args)


if __name__ == "__main__":
    main()
