"""``skicml pretrain tiny-clip``: the tiny CLIP shipped with skicml, trained on the shapes world.

The recipe behind ``skicml/clip/_weights/tiny_clip_shapes.pt``::

    skicml pretrain tiny-clip --steps 3000 --checkpoint run/tiny_clip.ckpt \\
        --export skicml/clip/_weights/tiny_clip_shapes.pt

A plain open_clip CLIP (:data:`skicml.clip._model.TINY_CLIP_CONFIG`, open_clip's
own BPE tokenizer) is trained with the CLIP contrastive loss on an endless
stream of :func:`skicml.datasets.make_shape_scenes` images and captions
(each batch drawn from its own seed, so the stream resumes exactly). The
weights are exported in float16 (under 10 MB) with their provenance: the
recipe, the data settings, steps, seed, held-out retrieval accuracy and the
W-CLIP evidence of :func:`wclip_evidence` (likelihood against corruption
severity, caption perturbations), measured on the exported weights.

``--data needle-frames`` trains on frames of
:func:`skicml.datasets.make_needle_videos` instead, captioned with the
objects they show (:class:`NeedleFrameStream`), for ViLAMP from pixels;
with ``--init-from tiny-clip-shapes`` it fine-tunes the shipped model (the
W-CLIP evidence is measured for the shapes world only)::

    skicml pretrain tiny-clip --data needle-frames --init-from tiny-clip-shapes --steps 600 \\
        --lr 3e-4 --batch-size 256 --threads 1 --checkpoint run/needle_clip.ckpt --export run/needle_clip.pt

An interrupted run (``--max-minutes``) resumes from ``--checkpoint`` with the
command it was started with; other steps, data, rates or widths are
refused (a larger ``--steps`` would splice two learning-rate schedules): a
finished run goes on as a new one, ``--init-from`` its checkpoint.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys
import time

import numpy as np
import torch

from .._weights import load_weights, save_weights
from ..datasets import SHAPE_TEXTURES, corrupt_images, make_shape_scenes, perturb_captions
from ..utils.images import preprocess_images
from ..utils.pretraining import add_run_options, recipe_provenance, run_recipe
from ._model import TINY_CLIP_CONFIG, build_clip, import_open_clip

__all__ = ["NeedleFrameStream", "ShapeCaptionStream", "main", "wclip_evidence"]

#: ``skicml pretrain tiny-clip`` (found by :func:`skicml.utils.discovery.all_pretrain_recipes`).
RECIPE_NAME = "tiny-clip"

#: Registry name and package file of the shipped model.
WEIGHTS_NAME = "tiny-clip-shapes"
WEIGHTS_FILE = "_weights/tiny_clip_shapes.pt"
MAX_MEGABYTES = 10.0

_EVAL_SEED = 2_000_003  # held-out scenes: a seed no training batch uses (those come from SeedSequence)


class ShapeCaptionStream:
    """Batches of (normalised images, token ids) from the shapes world.

    Batch ``i`` is ``make_shape_scenes(batch_size, random_state=s_i)`` with
    ``s_i`` drawn from ``SeedSequence([seed, i])``: the stream's state is the
    batch counter, so a resumed run sees the same batches.
    """

    def __init__(self, batch_size, seed, tokenizer, preprocess_cfg, scene_kwargs):
        self.batch_size = batch_size
        self.seed = seed
        self.tokenizer = tokenizer
        self.preprocess_cfg = preprocess_cfg
        self.scene_kwargs = dict(scene_kwargs)
        self.index = 0

    def batch_seed(self, index):
        return int(np.random.SeedSequence([self.seed, index]).generate_state(1)[0])

    def sample(self):
        seed = self.batch_seed(self.index)
        self.index += 1
        images, captions, _ = make_shape_scenes(self.batch_size, random_state=seed, **self.scene_kwargs)
        return images_to_tensor(images, self.preprocess_cfg), self.tokenizer(list(captions))

    def state_dict(self):
        return {"index": self.index}

    def load_state_dict(self, state):
        self.index = int(state["index"])


class NeedleFrameStream(ShapeCaptionStream):
    """Batches of needle-video frames with captions of the objects they show.

    Batch ``i`` renders ``batch_size // 4`` short videos with
    :func:`~skicml.datasets.make_needle_videos` (``random_state`` from
    ``SeedSequence([seed, i])``; 16 frames, 2 scenes, one drifting object a
    scene, one event followed by its decoy, one distractor scene, 3 classes
    on even batches and 4 on odd ones, so that every shape is an event, a
    decoy and a drifting object somewhere) and takes four frames of each:
    an event frame, a decoy frame, a distractor frame and a frame drawn at
    random, captioned by ``frame_captions`` ("a small red circle and a
    large blue square"). Spreading a batch over many videos keeps identical
    captions (false negatives of the contrastive loss) rare.
    """

    def sample(self):
        seed = self.batch_seed(self.index)
        self.index += 1
        return self.render(seed, self.index - 1)

    def render(self, seed, index=0):
        """The batch of ``seed``: (normalised images, token ids)."""
        from ..datasets import make_needle_videos

        n_videos = max(1, self.batch_size // 4)
        data = make_needle_videos(n_videos, n_frames=16, n_scenes=2, n_events=1, n_decoys=1, n_distractors=1,
                                  n_classes=3 + index % 2, random_state=seed, **self.scene_kwargs)
        rng = np.random.default_rng(seed)
        images, captions = [], []
        for video, frames, events, decoys, distractors in zip(data.videos, data.frame_captions, data.needle_frames,
                                                              data.decoy_frames, data.distractor_frames):
            picks = [rng.choice(events), rng.choice(decoys), rng.choice(distractors), rng.integers(len(video))]
            images.append(video[picks])
            captions += [frames[t] for t in picks]
        images = np.concatenate(images)[:self.batch_size]
        return images_to_tensor(images, self.preprocess_cfg), self.tokenizer(captions[:self.batch_size])


def images_to_tensor(images, preprocess_cfg):
    """uint8 images (n, H, W, 3) as the normalised tensor the model reads."""
    return preprocess_images(images / np.float32(255.0), preprocess_cfg).float()


def _preprocess_cfg(model):
    cfg = dict(import_open_clip().get_model_preprocess_cfg(model))
    size = cfg["size"]
    cfg["size"] = tuple(size) if isinstance(size, (list, tuple)) else (int(size), int(size))
    return cfg


def clip_loss(model, batch):
    """The symmetric InfoNCE loss of CLIP, with the logit scale clamped at 100 as open_clip trains."""
    from open_clip.loss import ClipLoss

    target = model.module if hasattr(model, "module") else model
    with torch.no_grad():
        target.logit_scale.clamp_(0, math.log(100))
    images, tokens = batch
    image_features, text_features, logit_scale = model(images, tokens)
    return ClipLoss()(image_features, text_features, logit_scale)


def retrieval_metrics(model, images, tokens):
    """Held-out contrastive loss and top-1 image->caption / caption->image accuracy."""
    with torch.no_grad():
        image_features, text_features, logit_scale = model(images, tokens)
        logits = logit_scale * image_features @ text_features.T
        labels = torch.arange(len(images))
        loss = 0.5 * (torch.nn.functional.cross_entropy(logits, labels)
                      + torch.nn.functional.cross_entropy(logits.T, labels))
        return {
            "heldout_loss": float(loss),
            "image_to_text_top1": float((logits.argmax(1) == labels).float().mean()),
            "text_to_image_top1": float((logits.argmax(0) == labels).float().mean()),
        }


def wclip_evidence(image_embedder, text_embedder, n_fit=2000, n_test=500, seed=_EVAL_SEED + 1, scene_kwargs=None):
    """The W-CLIP paper's qualitative claims, measured on the shapes world.

    - ``corruption``: whitening fitted on ``n_fit`` clean images; for each
      corruption of :func:`~skicml.datasets.corrupt_images` and severity
      1..5, the mean log-likelihood of ``n_test`` corrupted held-out images
      and the AUROC of clean against corrupted (likelihood as the score).
    - ``captions``: whitening fitted on ``n_fit`` captions; mean
      log-likelihood of held-out captions and of their perturbations
      (:func:`~skicml.datasets.perturb_captions`), with AUROC against the
      clean ones. A text-only likelihood cannot see ``mismatch`` (the
      captions stay well-formed).
    - ``pairs``: the log-likelihood of a caption *given its image*,
      ``log p(image, caption) - log p(image)``, from whitenings of the
      concatenated image and caption embeddings of matched pairs and of the
      image embeddings (log-determinants included, so both are densities),
      for the held-out captions and for the mismatched ones (an extension
      of the paper's per-modality likelihoods).
    - ``normality``: pass rates of :func:`~skicml.clip.normality_report` on
      whitened against raw held-out image embeddings: normal shape
      (Anderson-Darling, D'Agostino-Pearson) and standard normal
      (Kolmogorov-Smirnov against N(0, 1)).

    Parameters
    ----------
    image_embedder, text_embedder : fitted CLIPEmbedder
    n_fit, n_test : int
    seed : int
    scene_kwargs : dict or None
        Passed to :func:`~skicml.datasets.make_shape_scenes` (the training
        data's settings).

    Returns
    -------
    dict
    """
    from sklearn.metrics import roc_auc_score

    from ._analysis import normality_report
    from ._whitening import WhiteningLikelihood

    scene_kwargs = dict(scene_kwargs or {})
    images, captions, _ = make_shape_scenes(n_fit, random_state=seed, **scene_kwargs)
    test_images, test_captions, _ = make_shape_scenes(n_test, random_state=seed + 1, **scene_kwargs)
    image_fit, text_fit = image_embedder.transform(images), text_embedder.transform(list(captions))
    image_test, text_test = image_embedder.transform(test_images), text_embedder.transform(list(test_captions))
    image_w = WhiteningLikelihood().fit(image_fit)
    text_w = WhiteningLikelihood().fit(text_fit)
    clean = image_w.score_samples(image_test)

    def auroc(inlier, outlier):
        y = np.r_[np.ones(len(inlier)), np.zeros(len(outlier))]
        return float(roc_auc_score(y, np.r_[inlier, outlier]))

    corruption = {"clean_mean_ll": round(float(clean.mean()), 3)}
    for kind in ("gaussian_noise", "blur", "occlusion"):
        rows = []
        for severity in range(1, 6):
            corrupted = corrupt_images(test_images, kind, severity, random_state=seed + severity)
            scores = image_w.score_samples(image_embedder.transform(corrupted))
            rows.append({"severity": severity, "mean_ll": round(float(scores.mean()), 3),
                         "auroc": round(auroc(clean, scores), 4)})
        corruption[kind] = rows

    clean_text = text_w.score_samples(text_test)
    caption_rows = {"clean_mean_ll": round(float(clean_text.mean()), 3)}
    perturbed_text = {}
    for kind in ("scramble", "mismatch", "drop_attributes", "unseen_words"):
        perturbed = perturb_captions(test_captions, kind, random_state=seed)
        perturbed_text[kind] = text_embedder.transform(list(perturbed))
        scores = text_w.score_samples(perturbed_text[kind])
        caption_rows[kind] = {"mean_ll": round(float(scores.mean()), 3), "auroc": round(auroc(clean_text, scores), 4)}

    # log p(caption | image) = log p(image, caption) - log p(image), both
    # Gaussian after whitening; the log-determinants make them densities.
    pairs = WhiteningLikelihood(include_log_det=True).fit(np.hstack([image_fit, text_fit]))
    image_density = WhiteningLikelihood(include_log_det=True).fit(image_fit).score_samples(image_test)
    matched = pairs.score_samples(np.hstack([image_test, text_test])) - image_density
    mismatched = pairs.score_samples(np.hstack([image_test, perturbed_text["mismatch"]])) - image_density
    pair_rows = {"matched_mean_ll": round(float(matched.mean()), 3),
                 "mismatched_mean_ll": round(float(mismatched.mean()), 3),
                 "auroc": round(auroc(matched, mismatched), 4)}

    group = max(20, min(250, n_test // 2))
    tests = ("anderson", "dagostino", "standard")
    whitened = normality_report(image_w.transform(image_test), n_groups=max(1, n_test // group),
                                group_size=group, tests=tests)
    raw = normality_report(image_test, n_groups=max(1, n_test // group), group_size=group, tests=tests)
    normality = {f"whitened_{test}": round(float(rate), 4) for test, rate in whitened.mean().items()}
    normality.update({f"raw_{test}": round(float(rate), 4) for test, rate in raw.mean().items()})
    return {"n_fit": n_fit, "n_test": n_test, "corruption": corruption, "captions": caption_rows,
            "pairs": pair_rows, "normality": normality}


def build_parser():
    parser = argparse.ArgumentParser(prog="skicml pretrain tiny-clip", description=__doc__.splitlines()[0])
    arch = TINY_CLIP_CONFIG
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--image-size", type=int, default=arch["vision_cfg"]["image_size"])
    parser.add_argument("--max-objects", type=int, default=2, help="objects per scene, 1 to this")
    parser.add_argument("--embed-dim", type=int, default=arch["embed_dim"])
    parser.add_argument("--patch-size", type=int, default=arch["vision_cfg"]["patch_size"])
    parser.add_argument("--vision-width", type=int, default=arch["vision_cfg"]["width"])
    parser.add_argument("--vision-layers", type=int, default=arch["vision_cfg"]["layers"])
    parser.add_argument("--text-width", type=int, default=arch["text_cfg"]["width"])
    parser.add_argument("--text-layers", type=int, default=arch["text_cfg"]["layers"])
    parser.add_argument("--context-length", type=int, default=arch["text_cfg"]["context_length"])
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--eval-scenes", type=int, default=512, help="held-out scenes of the retrieval check")
    parser.add_argument("--evidence-fit", type=int, default=2000, help="scenes the exported W-CLIP check fits on")
    parser.add_argument("--evidence-test", type=int, default=2000, help="held-out scenes of that check")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--data", choices=["shapes", "needle-frames"], default="shapes",
                        help="shapes: make_shape_scenes; needle-frames: make_needle_videos frames with captions of "
                             "their objects (NeedleFrameStream)")
    parser.add_argument("--init-from", default=None,
                        help="start from these weights (a shipped name such as tiny-clip-shapes, a file or a "
                             "checkpoint) with a fresh schedule; the architecture options must match them")
    return add_run_options(parser, "weights")


def model_config(args):
    """The architecture of the run: :data:`TINY_CLIP_CONFIG` with the command-line widths."""
    cfg = copy.deepcopy(TINY_CLIP_CONFIG)
    cfg["embed_dim"] = args.embed_dim
    cfg["vision_cfg"].update(image_size=args.image_size, patch_size=args.patch_size, width=args.vision_width,
                             layers=args.vision_layers, head_width=min(32, args.vision_width))
    cfg["text_cfg"].update(width=args.text_width, layers=args.text_layers, context_length=args.context_length,
                           heads=max(1, args.text_width // 32))
    return cfg


#: The options a ``--checkpoint`` is bound to: the schedule, the data and the model it was started with.
_RUN_OPTIONS = ("steps", "batch_size", "lr", "weight_decay", "seed", "data", "init_from", "image_size", "max_objects",
                "embed_dim", "patch_size", "vision_width", "vision_layers", "text_width", "text_layers",
                "context_length")


def _check_resume(args):
    """Refuse to resume ``--checkpoint`` with other run options (``_RUN_OPTIONS``) than the call that started it.

    The checkpoint holds the learning-rate schedule of its first call's
    ``--steps``: resumed with a larger ``--steps``, the next step would run
    at the old schedule's final rate (0) and the rest on the tail of another
    schedule, silently; other data or widths would train another run under
    the first one's name. A finished run is extended by a new run with
    ``--init-from`` the checkpoint (a fresh schedule).
    """
    if not args.checkpoint or not os.path.exists(args.checkpoint):
        return
    meta = torch.load(args.checkpoint, map_location="cpu", weights_only=True, mmap=True)["history"]["meta"]
    changed = [f"--{key.replace('_', '-')} {meta[key]!r} (now {getattr(args, key)!r})" for key in _RUN_OPTIONS
               if key in meta and meta[key] != getattr(args, key)]
    if changed:
        raise ValueError(f"--checkpoint {args.checkpoint} was started with " + ", ".join(changed)
                         + "; resume it with the options it was started with, or start a new run (another "
                           "--checkpoint; --init-from the old one to continue from its weights with a fresh "
                           "schedule).")


def main(argv=None):
    args = build_parser().parse_args(argv)
    _check_resume(args)
    open_clip = import_open_clip()
    cfg = model_config(args)
    scene_kwargs = {"image_size": args.image_size, "max_objects": args.max_objects,
                    "textures": list(SHAPE_TEXTURES)}
    tokenizer = open_clip.tokenizer.SimpleTokenizer(context_length=args.context_length)
    needle = args.data == "needle-frames"
    eval_batch = {}  # the held-out needle frames, rendered at the first evaluation (they need the model's cfg)
    if needle:
        scene_kwargs = {"image_size": args.image_size}
    else:
        eval_images, eval_captions, _ = make_shape_scenes(args.eval_scenes, random_state=_EVAL_SEED,
                                                          **scene_kwargs)
        eval_tokens = tokenizer(list(eval_captions))
    stream_class = NeedleFrameStream if needle else ShapeCaptionStream

    def build_model(run):
        model = build_clip(cfg, {"size": args.image_size})
        if not args.quiet:
            n_params = _n_parameters(model)
            print(f"tiny CLIP: {n_params / 1e6:.2f}M parameters, {2 * n_params / 1e6:.1f} MB in float16", flush=True)
        return model

    def evaluate(module, step):
        device = next(module.parameters()).device
        if needle:
            if not eval_batch:
                stream = NeedleFrameStream(args.eval_scenes, _EVAL_SEED, tokenizer, _preprocess_cfg(module),
                                           scene_kwargs)
                eval_batch["images"], eval_batch["tokens"] = stream.render(_EVAL_SEED)
            images, tokens = eval_batch["images"], eval_batch["tokens"]
        else:
            images, tokens = images_to_tensor(eval_images, _preprocess_cfg(module)), eval_tokens
        return retrieval_metrics(module, images.to(device), tokens.to(device))

    run_recipe(
        args, argv, RECIPE_NAME, build_model=build_model, loss=clip_loss,
        make_source=lambda run: stream_class(args.batch_size, args.seed, tokenizer, _preprocess_cfg(run.model),
                                             scene_kwargs),
        evaluate=evaluate, finish=_print_retrieval, export=lambda run: _export(run, cfg, scene_kwargs, open_clip),
        device=args.device, weight_decay=args.weight_decay, warmup_fraction=0.05, grad_clip=1.0,
        checkpoint_every=100,
    )
    return 0


def _n_parameters(model):
    return sum(p.numel() for p in model.parameters())


def _print_retrieval(run):
    final = run.history["metrics"][-1] if run.history["metrics"] else {}
    print("held-out retrieval: " + ", ".join(f"{k}={v:.4f}" for k, v in final.items() if isinstance(v, float)))


def _export(run, cfg, scene_kwargs, open_clip):
    """Write the float16 weights with their provenance, then measure the W-CLIP evidence on that file and add it."""
    args, history = run.args, run.history
    state = {k: (v.half() if v.is_floating_point() else v) for k, v in run.model.cpu().state_dict().items()}
    megabytes = sum(v.numel() * v.element_size() for v in state.values()) / 1e6
    if megabytes > MAX_MEGABYTES:
        raise ValueError(f"the float16 weights take {megabytes:.1f} MB, over the {MAX_MEGABYTES} MB budget; "
                         "use narrower towers.")
    needle = getattr(args, "data", "shapes") == "needle-frames"
    config = {
        "name": "tiny-clip-needle-frames" if needle else WEIGHTS_NAME,
        "model_cfg": cfg,
        "preprocess_cfg": {"size": args.image_size},
        "tokenizer": "open_clip SimpleTokenizer (BPE vocabulary bundled with open_clip)",
    }
    n_params = _n_parameters(run.model)
    data = ({"generator": "skicml.datasets.make_needle_videos frame_captions (NeedleFrameStream)", **scene_kwargs}
            if needle else {"generator": "skicml.datasets.make_shape_scenes", **scene_kwargs})
    provenance = recipe_provenance(
        run, ("steps", "batch_size", "lr", "weight_decay", "seed", "final_loss", "train_minutes", "threads", "device",
              "torch"),
        data={**data, "stream": "batch i uses random_state SeedSequence([seed, i]).generate_state(1)[0]"},
        init_from=getattr(args, "init_from", None),
        parameters=n_params, stored_dtype="float16",
        heldout=[{k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items()} for m in history["metrics"]],
        open_clip=str(getattr(open_clip, "__version__", "unknown")),
    )
    digest = save_weights(args.export, state, config, provenance)
    if needle:  # the W-CLIP evidence is about the shapes world
        print(f"wrote {args.export} ({os.path.getsize(args.export) / 1e6:.1f} MB, sha256 {digest}); "
              "read it with CLIPEmbedder(pretrained=path)")
        return

    # The evidence is measured on the exported (float16) weights, then stored beside them.
    from ._embedder import CLIPEmbedder

    started = time.perf_counter()
    images = CLIPEmbedder(pretrained=args.export, device="cpu", batch_size=256).fit()
    texts = CLIPEmbedder(pretrained=args.export, modality="text", device="cpu", batch_size=256).fit()
    provenance["wclip_evidence"] = wclip_evidence(images, texts, n_fit=args.evidence_fit,
                                                  n_test=args.evidence_test, scene_kwargs=scene_kwargs)
    provenance["evidence_seconds"] = round(time.perf_counter() - started, 1)
    payload = load_weights(args.export)
    digest = save_weights(args.export, payload["state_dict"], config, provenance)
    _print_evidence(provenance["wclip_evidence"])
    print(f"wrote {args.export} ({os.path.getsize(args.export) / 1e6:.1f} MB, sha256 {digest})")
    print("register it in skicml/clip/__init__.py (copy the file to skicml/clip/" + WEIGHTS_FILE + "):")
    print(f'    register_weights("{WEIGHTS_NAME}", "skicml.clip", "{WEIGHTS_FILE}",\n'
          f'                     sha256="{digest}",\n'
          f'                     description="Tiny open_clip CLIP ({n_params / 1e6:.1f}M parameters, float16) '
          f'trained contrastively on make_shape_scenes; a toy for demos and tests")')


def _print_evidence(evidence):
    corruption = evidence["corruption"]
    print(f"image log-likelihood, clean: {corruption['clean_mean_ll']}")
    for kind in ("gaussian_noise", "blur", "occlusion"):
        cells = ", ".join(f"s{r['severity']}: {r['mean_ll']} (AUROC {r['auroc']})" for r in corruption[kind])
        print(f"  {kind}: {cells}")
    captions = evidence["captions"]
    print(f"caption log-likelihood, clean: {captions['clean_mean_ll']}")
    for kind in ("scramble", "mismatch", "drop_attributes", "unseen_words"):
        print(f"  {kind}: {captions[kind]['mean_ll']} (AUROC {captions[kind]['auroc']})")
    pairs = evidence["pairs"]
    print(f"caption log-likelihood given its image: matched {pairs['matched_mean_ll']}, "
          f"mismatched {pairs['mismatched_mean_ll']} (AUROC {pairs['auroc']})")
    print("normality pass rates: " + ", ".join(f"{k}={v}" for k, v in evidence["normality"].items()))


if __name__ == "__main__":
    sys.exit(main())
