"""Speed of the point-cloud ops: FPS, kNN, nearest neighbours and the interpolation's search.

CPU tables (float32, ``--threads`` torch threads, median of ``--repeats``
interleaved rounds after a warm-up):

- FPS at N = 1k / 8k / 64k points (B = 32 / 8 / 1 clouds, G = N/16 picks,
  at most 1024): the plain-torch reference (vectorised over the batch),
  ``skicml.ops.farthest_point_sample`` (the C kernel), and when importable
  ``fpsample.fps_sampling`` and its ``bucket_fps_kdline_sampling`` (h=5), one
  call per cloud. ``same``: the op's indices equal the reference's and
  fpsample's (both start at index 0);
- kNN (B = 32, G centres among N points, k neighbours; N = 1k / 2k with
  k = 32, the model's grouping N = 512, G = 64, k = 16 and its level-2
  grouping of 64 centres, G = 32, k = 8): ``torch.cdist`` + ``topk``,
  ``skicml.ops.knn`` (the C kernel: exact squared distances, ties to the
  lowest index) and ``scipy.spatial.cKDTree`` (build + query per cloud).
  ``same``: the op's distances equal cdist's squared (to float32 rounding)
  and its distances and indices the reference's bit for bit;
- the nearest neighbour of each point of Point-MAE's reconstructed groups
  (B*G = 2048 groups of n points, both directions of the Chamfer loss):
  ``skicml::chamfer_nearest`` (the kNN C kernel at k = 1), its plain-torch
  reference and ``torch.cdist`` + ``min``. ``same``: indices and distances
  equal the reference's;
- the neighbour search of inverse-distance interpolation (B = 32, all N points
  from N/4 sources, k = 3): the official full ``sort`` of the distance rows
  against ``skicml.ops.three_nn_interpolate`` (top-k).

With CUDA (and not ``--skip-gpu``), the Triton kernels (through the ops)
against the references on the GPU, with the bandwidth of the minimal traffic
(inputs read once, outputs written) as a fraction of a device copy's.

    OMP_NUM_THREADS=1 python benchmarks/bench_ops_point_cloud.py [--threads 1]
        [--repeats 3] [--quick] [--skip-gpu]
"""

import argparse
import importlib.metadata

import numpy as np
import torch
from _common import median_times

FPS_SHAPES = ((32, 1024, 64), (8, 8192, 512), (1, 65536, 1024))
KNN_SHAPES = ((32, 1024, 64, 32), (32, 2048, 128, 32), (32, 512, 64, 16), (32, 64, 32, 8))
NEAREST_SHAPES = ((2048, 16), (2048, 32))
INTERP_SHAPES = ((32, 1024, 3), (32, 2048, 3))
QUICK = {"fps": ((2, 64, 8), (1, 200, 16)), "knn": ((2, 64, 8, 4),), "interp": ((2, 64, 3),),
         "nearest": ((4, 16),)}


def _clouds(n_clouds, n_points, device="cpu", seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.rand(n_clouds, n_points, 3, generator=g, device=device) * 2 - 1


def _fpsample():
    try:
        import fpsample
    except ImportError:
        return None
    return fpsample


def _ratio(slow, fast):
    return "-" if slow is None else f"{slow / fast:.1f}x"


def _ms(seconds):
    return f"{'-':>9}" if seconds is None else f"{seconds * 1e3:9.2f}"


def fps_table(args, shapes):
    from skicml.ops import farthest_point_sample, farthest_point_sample_reference

    fpsample = _fpsample()
    version = importlib.metadata.version("fpsample") if fpsample else "absent"
    print(f"farthest_point_sample, CPU, float32, threads={args.threads}, torch={torch.__version__}"
          f", fpsample={version}")
    header = (f"{'B':>3} {'N':>6} {'G':>5} {'op ms':>9} {'torch ms':>9} {'fpsample':>9} "
              f"{'bucket':>9} {'torch/op':>8} {'fps/op':>7} {'bucket/op':>9} {'same':>5}")
    print(header)
    print("-" * len(header))
    for n_clouds, n_points, n_samples in shapes:
        points = _clouds(n_clouds, n_points)
        array = points.numpy()
        routes = {"op": lambda: farthest_point_sample(points, n_samples),
                  "torch": lambda: farthest_point_sample_reference(points, n_samples)}
        if fpsample is not None:
            routes["fpsample"] = lambda: np.stack(
                [fpsample.fps_sampling(cloud, n_samples, start_idx=0) for cloud in array])
            if hasattr(fpsample, "bucket_fps_kdline_sampling"):
                routes["bucket"] = lambda: np.stack([fpsample.bucket_fps_kdline_sampling(
                    cloud, n_samples, h=5, start_idx=0) for cloud in array])
        timings = median_times(routes, repeats=args.repeats, warmup=1)
        t_op, picked = timings["op"]
        same = torch.equal(picked, timings["torch"][1])
        if "fpsample" in timings:
            same = same and np.array_equal(picked.numpy(), timings["fpsample"][1].astype(np.int64))
        t = {name: timings[name][0] if name in timings else None
             for name in ("torch", "fpsample", "bucket")}
        print(f"{n_clouds:>3} {n_points:>6} {n_samples:>5} {_ms(t_op)} {_ms(t['torch'])} "
              f"{_ms(t['fpsample'])} {_ms(t['bucket'])} {_ratio(t['torch'], t_op):>8} "
              f"{_ratio(t['fpsample'], t_op):>7} {_ratio(t['bucket'], t_op):>9} "
              f"{str(same):>5}", flush=True)
    print("ratios: route ms / op ms (above 1: the op is faster); same: the op's indices equal "
          "the reference's and fpsample's")


def _cdist_topk(query, points, k):
    return torch.cdist(query, points).topk(k, dim=-1, largest=False)


def _kdtree(query, points, k):
    from scipy.spatial import cKDTree

    return [cKDTree(p).query(q, k) for q, p in zip(query.numpy(), points.numpy())]


def knn_table(args, shapes):
    from skicml.ops import knn, knn_reference

    print(f"\nknn, CPU, float32, threads={args.threads}: G query centres among N points")
    header = (f"{'B':>3} {'N':>6} {'G':>5} {'k':>3} {'op ms':>9} {'cdist ms':>9} {'kdtree ms':>9} "
              f"{'cdist/op':>8} {'kdtree/op':>9} {'same':>5}")
    print(header)
    print("-" * len(header))
    for n_clouds, n_points, n_centres, k in shapes:
        points = _clouds(n_clouds, n_points)
        query = points[:, :n_centres].contiguous()
        timings = median_times({
            "op": lambda: knn(query, points, k),
            "cdist": lambda: _cdist_topk(query, points, k),
            "kdtree": lambda: _kdtree(query, points, k),
        }, repeats=args.repeats, warmup=1)
        t_op = timings["op"][0]
        # cdist's distances round differently: on a near-tie at the k-th
        # neighbour (rare in random data) it may pick another point at the
        # same float32 distance, so its sorted distances are compared, not its
        # indices.
        same = torch.allclose(timings["op"][1][0], timings["cdist"][1].values.square(),
                              rtol=1e-5, atol=1e-6)
        expected = knn_reference(query, points, k)
        same = same and all(map(torch.equal, timings["op"][1], expected))
        t_cdist, t_tree = timings["cdist"][0], timings["kdtree"][0]
        print(f"{n_clouds:>3} {n_points:>6} {n_centres:>5} {k:>3} {_ms(t_op)} {_ms(t_cdist)} "
              f"{_ms(t_tree)} {_ratio(t_cdist, t_op):>8} {_ratio(t_tree, t_op):>9} "
              f"{str(same):>5}", flush=True)


def nearest_table(args, shapes):
    from skicml.ops._point_cloud import _nearest_reference

    nearest = torch.ops.skicml.chamfer_nearest
    print(f"\nchamfer_nearest, CPU, float32, threads={args.threads}: nearest point of b for "
          "each point of a, B groups of n points")
    header = (f"{'B':>5} {'n':>4} {'op ms':>9} {'ref ms':>9} {'cdist ms':>9} {'ref/op':>7} "
              f"{'cdist/op':>8} {'same':>5}")
    print(header)
    print("-" * len(header))
    for n_groups, n_points in shapes:
        a, b = _clouds(n_groups, n_points), _clouds(n_groups, n_points, seed=1)
        timings = median_times({
            "op": lambda: nearest(a, b),
            "ref": lambda: _nearest_reference(a, b),
            "cdist": lambda: torch.cdist(a, b).min(dim=-1),
        }, repeats=args.repeats, warmup=1)
        (t_op, got), (t_ref, expected) = timings["op"], timings["ref"]
        same = all(map(torch.equal, got, expected))
        print(f"{n_groups:>5} {n_points:>4} {_ms(t_op)} {_ms(t_ref)} {_ms(timings['cdist'][0])} "
              f"{_ratio(t_ref, t_op):>7} {_ratio(timings['cdist'][0], t_op):>8} {str(same):>5}",
              flush=True)


def _interpolate_sorted(query, points, features, k=3):
    """The official feature propagation: square distances, a full sort, the first k."""
    dist = ((query[:, :, None] - points[:, None]) ** 2).sum(-1)
    dist, index = dist.sort(dim=-1)
    dist, index = dist[..., :k], index[..., :k]
    weight = 1.0 / (dist + 1e-8)
    weight = weight / weight.sum(-1, keepdim=True)
    gathered = torch.gather(features[:, None].expand(-1, query.shape[1], -1, -1), 2,
                            index[..., None].expand(-1, -1, -1, features.shape[2]))
    return (gathered * weight[..., None]).sum(2)


def interp_table(args, shapes):
    from skicml.ops import three_nn_interpolate

    print(f"\nthree_nn_interpolate, CPU, float32, threads={args.threads}: all N points from N/4 "
          "sources, C = 32 channels")
    header = f"{'B':>3} {'N':>6} {'k':>3} {'topk ms':>9} {'sort ms':>9} {'sort/topk':>9} {'max diff':>9}"
    print(header)
    print("-" * len(header))
    for n_clouds, n_points, k in shapes:
        query = _clouds(n_clouds, n_points)
        sources = query[:, :n_points // 4].contiguous()
        features = _clouds(n_clouds, n_points // 4, seed=1).repeat(1, 1, 11)[..., :32]
        timings = median_times({
            "topk": lambda: three_nn_interpolate(query, sources, features, k=k),
            "sort": lambda: _interpolate_sorted(query, sources, features, k=k),
        }, repeats=args.repeats, warmup=1)
        (t_topk, out), (t_sort, expected) = timings["topk"], timings["sort"]
        diff = (out - expected).abs().max().item()
        print(f"{n_clouds:>3} {n_points:>6} {k:>3} {_ms(t_topk)} {_ms(t_sort)} "
              f"{_ratio(t_sort, t_topk):>9} {diff:9.1e}", flush=True)


def gpu_table(args):
    from skicml.ops import (
        chamfer_distance,
        chamfer_distance_reference,
        farthest_point_sample,
        farthest_point_sample_reference,
        knn,
        knn_reference,
    )

    print(f"\nCUDA ({torch.cuda.get_device_name()}): Triton kernels (through the ops) vs the "
          "references on the GPU, float32")
    header = (f"{'op':>8} {'B':>3} {'N':>6} {'G/k':>9} {'op ms':>9} {'ref ms':>9} {'ref/op':>7} "
              f"{'GB/s':>7} {'fraction':>8} {'same':>5}")
    print(header)
    print("-" * len(header))
    copy_source = torch.empty(2**26, device="cuda")
    t_copy = median_times({"copy": copy_source.clone}, repeats=args.repeats, device="cuda")
    copy_bandwidth = 2 * copy_source.numel() * 4 / t_copy["copy"][0] / 1e9
    cases = []
    for n_clouds, n_points, n_samples in FPS_SHAPES:
        points = _clouds(n_clouds, n_points, device="cuda")
        cases.append(("fps", n_clouds, n_points, n_samples,
                      lambda p=points, s=n_samples: farthest_point_sample(p, s),
                      lambda p=points, s=n_samples: farthest_point_sample_reference(p, s),
                      points.numel() * 4 + n_clouds * n_samples * 8))
    for n_clouds, n_points, n_centres, k in KNN_SHAPES:
        points = _clouds(n_clouds, n_points, device="cuda")
        query = points[:, :n_centres].contiguous()
        cases.append(("knn", n_clouds, n_points, f"{n_centres}/{k}",
                      lambda q=query, p=points, k=k: knn(q, p, k),
                      lambda q=query, p=points, k=k: knn_reference(q, p, k),
                      (points.numel() + query.numel()) * 4 + n_clouds * n_centres * k * 12))
    for n_clouds, n_points in ((32, 1024), (32, 2048)):
        a = _clouds(n_clouds, n_points, device="cuda")
        b = _clouds(n_clouds, n_points, device="cuda", seed=1)
        cases.append(("chamfer", n_clouds, n_points, "-",
                      lambda a=a, b=b: chamfer_distance(a, b),
                      lambda a=a, b=b: chamfer_distance_reference(a, b),
                      2 * (a.numel() + b.numel()) * 4 + 2 * a.shape[0] * a.shape[1] * 12))
    for name, n_clouds, n_points, size, op, ref, moved in cases:
        timings = median_times({"op": op, "ref": ref}, repeats=args.repeats, device="cuda")
        (t_op, got), (t_ref, expected) = timings["op"], timings["ref"]
        same = (torch.equal(got[1], expected[1]) if isinstance(got, tuple)
                else torch.allclose(got, expected))
        bandwidth = moved / t_op / 1e9
        print(f"{name:>8} {n_clouds:>3} {n_points:>6} {size!s:>9} {_ms(t_op)} {_ms(t_ref)} "
              f"{t_ref / t_op:6.1f}x {bandwidth:7.1f} {bandwidth / copy_bandwidth:8.4f} "
              f"{str(same):>5}", flush=True)
    print(f"GB/s: inputs read once and outputs written / op time; fraction: of the copy "
          f"bandwidth ({copy_bandwidth:.0f} GB/s). FPS is a chain of G dependent steps: "
          "latency-bound, not bandwidth-bound")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    parser.add_argument("--skip-gpu", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    fps_table(args, QUICK["fps"] if args.quick else FPS_SHAPES)
    knn_table(args, QUICK["knn"] if args.quick else KNN_SHAPES)
    interp_table(args, QUICK["interp"] if args.quick else INTERP_SHAPES)
    nearest_table(args, QUICK["nearest"] if args.quick else NEAREST_SHAPES)
    if torch.cuda.is_available() and not args.skip_gpu and not args.quick:
        gpu_table(args)


if __name__ == "__main__":
    main()
