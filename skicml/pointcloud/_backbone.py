"""Where a point-cloud backbone comes from: a shipped name, a checkpoint file, a module, or nothing.

Three kinds of files load:

- skicml's own (written by :meth:`PointMAEPretrainer.save_backbone` or the
  ``skicml pretrain pointcloud`` recipe): weights, config and provenance;
- official Point-MAE checkpoints (``pretrain.pth``, and the ReCon and
  Point-FEMAE encoders that share its layout): the weights under
  ``base_model``, prefixes ``module.``, ``MAE_encoder.`` and ``base_model.``
  stripped, ``blocks.blocks.i`` read as ``blocks.i``. Keys of the decoder and
  of fine-tuning heads are left out; a backbone key the file lacks is an error;
- a plain state dict with the backbone's own key names.

The grouping (``num_group``, ``group_size``) is not part of the weights: the
caller sets it.
"""

from __future__ import annotations

import copy
import re

from .._weights import load_weights
from ._model import PointMAEBackbone

__all__ = ["BACKBONE_PROTOCOL", "official_state_dict", "resolve_backbone"]

#: What a backbone module must offer GAPrompt (spec section 4.2).
BACKBONE_PROTOCOL = ("group", "embed", "pos", "blocks", "norm", "trans_dim", "num_group", "group_size")

#: The architecture of ``pretrained=None``: the shipped backbone's, with random weights.
DEFAULT_BACKBONE = {"trans_dim": 128, "depth": 6, "num_heads": 4}

_BACKBONE_PREFIXES = ("encoder.", "pos_embed.", "blocks.", "norm.")
_ARCHITECTURE_KEYS = ("trans_dim", "depth", "num_heads", "mlp_ratio", "drop_path_rate", "encoder_channels")


def official_state_dict(state):
    """The backbone's weights out of an official Point-MAE-style state dict.

    Parameters
    ----------
    state : dict
        The checkpoint: with a ``base_model`` entry, or that entry itself.

    Returns
    -------
    dict
        Tensors under :class:`PointMAEBackbone`'s key names.
    """
    state = state.get("base_model", state.get("model", state))
    out = {}
    for key, value in state.items():
        key = key.removeprefix("module.")
        for prefix in ("MAE_encoder.", "base_model."):
            key = key.removeprefix(prefix)
        key = re.sub(r"^blocks\.blocks\.", "blocks.", key)
        if key.startswith(_BACKBONE_PREFIXES) and not key.startswith("decoder"):
            out[key] = value
    return out


def _architecture(state):
    """trans_dim, depth and mlp_ratio read off the weights (heads are not: 64 per head is assumed)."""
    dim = state["norm.weight"].shape[0]
    depth = 1 + max(int(m.group(1)) for k in state if (m := re.match(r"blocks\.(\d+)\.", k)))
    hidden = state["blocks.0.mlp.fc1.weight"].shape[0]
    channels = (state["encoder.first_conv.0.weight"].shape[0], state["encoder.first_conv.3.weight"].shape[0],
                state["encoder.second_conv.0.weight"].shape[0])
    return {"trans_dim": dim, "depth": depth, "num_heads": max(1, dim // 64), "mlp_ratio": hidden / dim,
            "encoder_channels": channels}


def _check_protocol(module, name):
    missing = [attr for attr in BACKBONE_PROTOCOL if not hasattr(module, attr)]
    if missing:
        raise TypeError(
            f"{name}: the backbone module {type(module).__name__} lacks {missing}; a point-cloud backbone "
            f"offers {list(BACKBONE_PROTOCOL)} (see PointMAEBackbone)."
        )


def resolve_backbone(pretrained, *, num_group, group_size, name="pretrained"):
    """A fresh backbone module and its provenance.

    Parameters
    ----------
    pretrained : str, path-like, torch.nn.Module or None
        A shipped name, a checkpoint path, a module following the protocol
        (copied, never changed) or None (random weights of the shipped
        architecture).
    num_group, group_size : int
        The grouping to read clouds with.
    name : str
        The parameter's name, for error messages.

    Returns
    -------
    backbone : torch.nn.Module
    provenance : dict
    """
    if pretrained is None:
        backbone = PointMAEBackbone(**DEFAULT_BACKBONE, num_group=num_group, group_size=group_size)
        return backbone, {"weights": "random"}
    if hasattr(pretrained, "parameters"):
        _check_protocol(pretrained, name)
        backbone = copy.deepcopy(pretrained)
        provenance = {"weights": f"module {type(pretrained).__name__}"}
    else:
        payload = load_weights(pretrained)
        state, config = payload["state_dict"], payload["config"]
        if "base_model" in state or any(k.startswith(("MAE_encoder.", "module.")) for k in state):
            state = official_state_dict(state)
        state = {k: v for k, v in state.items() if k.startswith(_BACKBONE_PREFIXES)}
        if not {"norm.weight", "blocks.0.mlp.fc1.weight", "encoder.first_conv.0.weight"} <= set(state):
            raise ValueError(
                f"{name}={pretrained!r}: the file holds no Point-MAE backbone (no 'encoder.first_conv...', "
                f"'blocks.0...' or 'norm.weight' weights, also after stripping the official prefixes)."
            )
        architecture = {k: config[k] for k in _ARCHITECTURE_KEYS if k in config} or _architecture(state)
        backbone = PointMAEBackbone(**architecture, num_group=num_group, group_size=group_size)
        expected = set(backbone.state_dict())
        missing = sorted(expected - set(state))
        unexpected = sorted(set(state) - expected)
        if missing or unexpected:
            raise ValueError(
                f"{name}={pretrained!r} does not fit a Point-MAE backbone of {architecture}: "
                f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, unexpected "
                f"{unexpected[:5]}{'...' if len(unexpected) > 5 else ''}."
            )
        backbone.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()})
        provenance = dict(payload["provenance"])
    backbone.num_group = num_group
    backbone.group_size = group_size
    return backbone, provenance
