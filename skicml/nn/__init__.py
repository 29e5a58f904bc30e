"""Building blocks shared by several skicml models."""

from .attention import InducedSelfAttentionBlock, MultiheadAttentionBlock, PackedMultiheadAttention
from .mamba2 import BidirectionalMamba2Layer, Mamba2Mixer
from .norm import RMSNorm
from .rope import RotaryEmbedding

__all__ = [
    "BidirectionalMamba2Layer",
    "InducedSelfAttentionBlock",
    "Mamba2Mixer",
    "MultiheadAttentionBlock",
    "PackedMultiheadAttention",
    "RMSNorm",
    "RotaryEmbedding",
]
