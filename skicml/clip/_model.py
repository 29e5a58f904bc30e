"""The CLIP networks of the family, as open_clip builds them.

open_clip (the ``clip`` extra) is imported lazily by :func:`import_open_clip`
so that the whitening core works without it. The tiny CLIP that skicml
ships is a plain :class:`open_clip.CLIP` with :data:`TINY_CLIP_CONFIG` and
open_clip's own BPE tokenizer (which ships inside the open_clip wheel); its
size is dominated by the 49,408-row token table, so the text tower is narrow.
"""

from __future__ import annotations

import copy
import zipfile

__all__ = ["TINY_CLIP_CONFIG", "TINY_CLIP_PREPROCESS", "build_clip", "import_open_clip",
           "is_skicml_checkpoint", "is_torchscript_archive"]

#: The architecture of the shipped tiny CLIP (``skicml pretrain tiny-clip``):
#: 32x32 images in 4x4 patches, captions of up to 20 tokens, 32-d embeddings.
#: 3.4M parameters, 3.3M of them in the token table; 6.8 MB in float16.
TINY_CLIP_CONFIG = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 3, "width": 64, "patch_size": 4, "head_width": 32,
                   "mlp_ratio": 2.0},
    "text_cfg": {"context_length": 20, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2,
                 "mlp_ratio": 2.0},
}

#: Preprocessing of the tiny CLIP: open_clip's defaults (OpenAI mean and
#: std, bicubic, shortest-side resize) at 32 pixels.
TINY_CLIP_PREPROCESS = {"size": 32}

_INSTALL_HINT = (
    "pip install 'skicml[clip]' together with a matching torch/torchvision pair, e.g. "
    "pip install torch==2.14.1 torchvision==0.29.1 (torchvision's compiled operators must "
    "match the installed torch; see doc/install.rst)"
)


def import_open_clip():
    """Import open_clip, or raise an ImportError that says how to install it."""
    try:
        import open_clip
    except ImportError as exc:
        raise ImportError(
            f"This needs open_clip (the 'clip' extra), which could not be imported ({exc}). "
            f"Install it with: {_INSTALL_HINT}."
        ) from exc
    except RuntimeError as exc:  # e.g. "operator torchvision::nms does not exist"
        raise ImportError(
            f"open_clip is installed but its torchvision does not load next to this torch "
            f"({exc}). Install the matching pair: {_INSTALL_HINT}."
        ) from exc
    return open_clip


def build_clip(model_cfg, preprocess_cfg=None):
    """A randomly initialised :class:`open_clip.CLIP` from a config dict.

    Parameters
    ----------
    model_cfg : dict
        ``{"embed_dim", "vision_cfg", "text_cfg"}`` and optionally
        ``"quick_gelu"`` and the other :class:`open_clip.CLIP` arguments, as
        in open_clip's ``model_configs/*.json``. Text towers from Hugging
        Face (``hf_model_name``) are refused: they would be downloaded.
    preprocess_cfg : dict or None
        Overrides of open_clip's preprocessing defaults (``size``, ``mean``,
        ``std``, ``interpolation``, ``resize_mode``); ``size`` defaults to
        the vision tower's image size.

    Returns
    -------
    open_clip.CLIP
        In training mode, as open_clip returns it; the preprocessing
        settings are attached as open_clip's ``create_model`` does.
    """
    open_clip = import_open_clip()
    from dataclasses import asdict

    from open_clip.transform import PreprocessCfg, merge_preprocess_dict

    cfg = copy.deepcopy(dict(model_cfg))
    text_cfg = cfg.get("text_cfg", {})
    if text_cfg.get("hf_model_name") or text_cfg.get("hf_tokenizer_name"):
        raise ValueError(
            "model_config has a Hugging Face text tower or tokenizer (hf_model_name / "
            "hf_tokenizer_name), which open_clip would download; skicml never downloads. Save the "
            "model with its tokenizer in a folder and pass model_name='local-dir:<folder>'."
        )
    if "vision_cfg" not in cfg or "text_cfg" not in cfg or "embed_dim" not in cfg:
        raise ValueError(
            f"model_config needs 'embed_dim', 'vision_cfg' and 'text_cfg'; got keys {sorted(cfg)}."
        )
    cfg.pop("custom_text", None)
    model = open_clip.CLIP(**cfg)
    preprocess = asdict(PreprocessCfg())
    preprocess["size"] = model.visual.image_size
    preprocess = merge_preprocess_dict(preprocess, dict(preprocess_cfg or {}))
    open_clip.model.set_model_preprocess_cfg(model, preprocess)
    return model


def is_torchscript_archive(path):
    """Whether ``path`` is a TorchScript archive, the format of OpenAI's CLIP releases.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    bool
        True for a zip archive with a ``code/`` folder; False for anything
        else, unreadable files included.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            return any("/code/" in name or name.startswith("code/") for name in archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def is_skicml_checkpoint(path):
    """Whether ``path`` is a skicml weights file of an open_clip CLIP.

    Such a file (``skicml._weights.save_weights``) carries its architecture
    as an open_clip ``model_cfg`` in its config, where open_clip and OpenAI
    state dicts need the architecture named beside them.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    bool
        False for safetensors and numpy files, files ``torch.load`` cannot
        read without running pickled code, and payloads without
        ``config["model_cfg"]``.
    """
    import torch

    if str(path).endswith((".safetensors", ".npz", ".npy")):
        return False
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 - not ours (old format, JIT archive, other pickles)
        return False
    config = payload.get("config") if isinstance(payload, dict) else None
    return isinstance(config, dict) and "model_cfg" in config
