"""Building blocks shared by several skicml models."""

from .attention import InducedSelfAttentionBlock, MultiheadAttentionBlock, PackedMultiheadAttention
from .norm import RMSNorm
from .rope import RotaryEmbedding

__all__ = [
    "InducedSelfAttentionBlock",
    "MultiheadAttentionBlock",
    "PackedMultiheadAttention",
    "RMSNorm",
    "RotaryEmbedding",
]
