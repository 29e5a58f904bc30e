"""The ``skicml`` command line: ``info``, ``download``, ``tour`` and ``pretrain``.

Method families plug into it by convention, found on the file tree by
:mod:`skicml.utils.discovery` when this module is imported:

- ``TOUR_MODULES``: every ``_tour.py`` under a domain folder, exposing
  ``tour_entries()``, a list of :class:`skicml.utils.tour.TourEntry`, so
  ``skicml tour`` grows as families land;
- ``PRETRAIN_RECIPES``: ``name -> "module:main"`` for every ``_pretrain.py``
  (and a family's further recipes, ``_pretrain_<what>.py``), named by its
  ``RECIPE_NAME``; ``main`` takes the remaining arguments.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.resources
import os
import platform
import sys
import time

from .utils.discovery import all_pretrain_recipes, all_tour_modules
from .utils.tour import TourEntry

__all__ = ["PRETRAIN_RECIPES", "TOUR_MODULES", "TourEntry", "main"]

#: Modules with a ``tour_entries()`` function, one per method family.
TOUR_MODULES: list = all_tour_modules()

#: ``skicml pretrain <name>`` recipes, as ``"module:function"``.
PRETRAIN_RECIPES: dict = all_pretrain_recipes()


def _versions():
    import numpy
    import sklearn
    import torch

    import skicml

    rows = [
        ("skicml", skicml.__version__),
        ("python", platform.python_version()),
        ("numpy", numpy.__version__),
        ("scikit-learn", sklearn.__version__),
        ("torch", torch.__version__),
    ]
    for optional in ("skorch", "triton", "open_clip", "torch_geometric", "rdkit"):
        try:
            module = importlib.import_module(optional)
            rows.append((optional, getattr(module, "__version__", "installed")))
        except Exception:  # noqa: BLE001 - an optional extra that is absent or broken
            rows.append((optional, "not installed"))
    return rows


def _table(header, rows):
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths)).rstrip(), line]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(out)


def cmd_info(args):
    import torch

    from . import _weights
    from .base import resolve_device
    from .utils import all_estimators

    print(_table(("package", "version"), _versions()))
    print()
    device = resolve_device("auto")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    print(f"device: {device} ({name}), torch threads: {torch.get_num_threads()}")
    print()
    estimators = [n for n, _ in all_estimators()]
    print(f"estimators ({len(estimators)}): {', '.join(estimators) if estimators else 'none yet'}")
    print()
    shipped = _weights.available_weights()
    if not shipped:
        print("shipped models: none yet")
        _print_published()
        return 0
    if not args.verbose:
        print("shipped models:")
        print(_table(("name", "size", "what it is", "benchmark"), [_model_row(e) for e in shipped.values()]))
        _print_published()
        print("\n(skicml info --verbose prints each shipped model's full provenance)")
        return 0
    _print_published()
    print()
    print("shipped models:")
    for entry in shipped.values():
        if not entry.is_installed():
            print(f"  {entry.name}: MISSING ({entry.filename})")
            continue
        provenance = _weights.load_weights(entry.name)["provenance"]
        print(f"  {entry.name}: {entry.description}")
        if entry.benchmark:
            print(f"      benchmark: {entry.benchmark}")
        for key, value in sorted(provenance.items()):
            print(f"      {key}: {value}")
    return 0


def _print_published():
    from . import _weights

    published = _weights.published_weights()
    rows = []
    for entry in published.values():
        try:
            cached = "yes" if entry.is_cached() else "no"
        except Exception as error:  # noqa: BLE001 - a broken hub install must not hide the table
            cached = f"? ({type(error).__name__})"
        rows.append((entry.name, cached, entry.estimators, _shorten(entry.description, 50)))
    print()
    print(f"published models (fetched once into the cache; `skicml download NAME` fetches ahead of time; "
          f"hub cache: {_weights.hub_cache_dir()}):")
    print(_table(("name", "cached", "estimators", "what it is"), rows))
    cached_tags = _cached_open_clip_tags()
    print("  and every open_clip (model_name, pretrained tag) pair of open_clip.list_pretrained(), for "
          "CLIPEmbedder (`skicml download ViT-B-32:laion2b_s34b_b79k`)"
          + (f"; cached: {', '.join(cached_tags)}" if cached_tags else ""))


def _cached_open_clip_tags():
    """open_clip pairs whose weights are in the hub cache (looked up without importing open_clip's models)."""
    from . import _weights

    try:
        import open_clip
    except Exception:  # noqa: BLE001 - the clip extra is optional
        return []
    cache = _weights.hub_cache_dir()
    if not os.path.isdir(cache):
        return []
    present = set(os.listdir(cache))
    found = []
    for model_name, tag in open_clip.list_pretrained():
        hub = open_clip.get_pretrained_cfg(model_name, tag).get("hf_hub", "")
        if hub and "models--" + os.path.split(hub)[0].replace("/", "--") in present:
            entry = _weights.published_weights(tag, model_name=model_name)
            if entry is not None and entry.is_cached():
                found.append(f"{model_name}:{tag}")
    return found


def cmd_download(args):
    from . import _weights

    entries = []
    for name in args.names:
        entry = _weights.published_weights(name)
        if entry is None:
            known = ", ".join(sorted(_weights.published_weights()))
            print(f"skicml download: {name!r} is not a published model; the published names are {known}, and "
                  "open_clip's MODEL:TAG pairs (e.g. ViT-B-32:laion2b_s34b_b79k).", file=sys.stderr)
            return 2
        entries.append(entry)
    for entry in entries:
        try:
            path = entry.fetch(download=True)
        except _weights.NotCachedError:
            print(f"skicml download: {entry.name} is not cached and HF_HUB_OFFLINE=1 forbids downloading it: run "
                  "this without HF_HUB_OFFLINE on a machine with internet.", file=sys.stderr)
            return 1
        except Exception as error:  # noqa: BLE001 - the hub's or torch's own message says what failed
            print(f"skicml download: {entry.name}: {error}", file=sys.stderr)
            return 1
        print(f"{entry.name}: {path}")
    return 0


def _shorten(text, width=60):
    if len(text) <= width:
        return text
    return text[:width - 3].rsplit(" ", 1)[0].rstrip(",;:") + "..."


def _model_row(entry):
    if not entry.is_installed():
        return entry.name, "MISSING", entry.filename, "-"
    with importlib.resources.as_file(entry.path()) as path:
        size = f"{path.stat().st_size / 1e6:.1f} MB"
    return entry.name, size, _shorten(entry.description), entry.benchmark or "-"


def _tour_entries():
    entries = []
    for module_name in TOUR_MODULES:
        module = importlib.import_module(module_name)
        entries.extend(module.tour_entries())
    return entries


def _torch_threads_setting():
    from . import get_config

    threads = get_config()["torch_threads"]
    return "torch's own" if threads is None else threads


def cmd_tour(args):
    from threadpoolctl import threadpool_limits

    from . import get_config
    from .base import progress, torch_threads

    entries = _tour_entries()
    if args.only:
        matching = [e for e in entries if args.only.lower() in e.method.lower()]
        if not matching:
            # A typo must not look like a successful, empty tour.
            choices = ", ".join(e.method for e in entries) or "none"
            print(f"skicml tour: --only {args.only!r} matches no method; the methods are: {choices}",
                  file=sys.stderr)
            return 2
        entries = matching
    if not entries:
        print(
            "skicml tour: no estimator is available yet, so there is nothing to "
            "fit. The tour grows as method families land."
        )
        return 0
    rows, missing = [], []
    start, cpu_start = time.perf_counter(), time.process_time()
    bar = progress(entries, verbose=1, desc="tour", unit="method")
    for entry in bar:
        bar.set_postfix_str(entry.method)
        absent = entry.missing_requirements()
        if absent:
            # A row whose extra is not installed says so instead of stopping the tour.
            rows.append((entry.method, entry.task, entry.metric, "-", entry.baseline, "-", "-", "-", "-"))
            needs = f"needs the {entry.extra} extra (pip install \"skicml[{entry.extra}]\"): " if entry.extra else ""
            missing.append(f"{entry.method}: skipped, {needs}{', '.join(absent)} cannot be imported")
            bar.write(f"tour: {entry.method} skipped", file=sys.stderr)
            continue
        row_start, row_cpu_start = time.perf_counter(), time.process_time()
        # The rows' own work follows the thread policy too: torch's (metrics, tensors) and, with the same
        # count (None: no limit), the BLAS and OpenMP pools of the scikit-learn baselines, whose spinning threads cost as much as torch's on a
        # busy machine (a GaussianMixture baseline took 70 CPU-s beside one busy process, 4 alone).
        with torch_threads(), threadpool_limits(limits=get_config()["torch_threads"]):
            result = entry.run()
        row_seconds = time.perf_counter() - row_start
        row_cpu_seconds = time.process_time() - row_cpu_start
        rows.append((
            entry.method, entry.task, entry.metric,
            f"{result['score']:.4f}", entry.baseline, f"{result['baseline_score']:.4f}",
            f"{result.get('seconds', float('nan')):.1f}", f"{row_seconds:.1f}", f"{row_cpu_seconds:.1f}",
        ))
        # The table waits for the last row; each row reports its own time as it ends.
        bar.write(f"tour: {entry.method} done in {row_seconds:.1f} s", file=sys.stderr)
    print(_table(("method", "task", "metric", "score", "baseline", "baseline score", "seconds", "row seconds",
                  "row CPU seconds"), rows))
    for line in missing:
        print(line)
    print(f"\ntotal {time.perf_counter() - start:.1f} s, {time.process_time() - cpu_start:.1f} CPU seconds "
          f"(torch threads: {_torch_threads_setting()})")
    return 0


def cmd_pretrain(args, extra):
    if args.recipe is None or args.recipe not in PRETRAIN_RECIPES:
        known = ", ".join(sorted(PRETRAIN_RECIPES)) or "none yet"
        if args.recipe is not None:
            print(f"skicml pretrain: unknown recipe {args.recipe!r}; available: {known}", file=sys.stderr)
            return 2
        print(f"available pretraining recipes: {known}")
        return 0
    module_name, function = PRETRAIN_RECIPES[args.recipe].split(":")
    return getattr(importlib.import_module(module_name), function)(extra) or 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog="skicml", description="Methods of ICML 2025 papers as scikit-learn estimators."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="versions, device, estimators, shipped and published models")
    info.add_argument("--verbose", action="store_true", help="print every shipped model's full provenance")
    download = sub.add_parser(
        "download", help="fetch published models into the cache, for a machine that will run offline",
        description="Fetch published models (TabICL's official checkpoints, open_clip's MODEL:TAG pairs, "
                    "Point-MAE...; `skicml info` lists them) once into the Hugging Face or torch.hub cache, "
                    "where estimators given their names read them afterwards, also with HF_HUB_OFFLINE=1. "
                    "The cache follows HF_HOME / HF_HUB_CACHE (TORCH_HOME for a URL).")
    download.add_argument("names", nargs="+", metavar="NAME",
                          help="a published name, e.g. tabicl-classifier-v2-20260212.ckpt or "
                               "ViT-B-32:laion2b_s34b_b79k")
    tour = sub.add_parser("tour", help="fit every available estimator on offline data")
    tour.add_argument("--only", help="run only the methods whose name contains this")
    pretrain = sub.add_parser("pretrain", help="pretrain a shipped model (recipe arguments follow)")
    pretrain.add_argument("recipe", nargs="?", help="recipe name; omit to list them")
    return parser


def main(argv=None):
    """Entry point of the ``skicml`` console script."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "pretrain":
        return cmd_pretrain(args, extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return {"info": cmd_info, "download": cmd_download, "tour": cmd_tour}[args.command](args)
