"""Building blocks shared by several skicml models."""

from .attention import InducedSelfAttentionBlock, MultiheadAttentionBlock, PackedMultiheadAttention
from .mamba2 import BidirectionalMamba2Layer, Mamba2Mixer
from .moe import ExpertRaceMoE
from .norm import RMSNorm
from .rope import RotaryEmbedding
from .transformer import LlamaBlock

__all__ = [
    "BidirectionalMamba2Layer",
    "ExpertRaceMoE",
    "InducedSelfAttentionBlock",
    "LlamaBlock",
    "Mamba2Mixer",
    "MultiheadAttentionBlock",
    "PackedMultiheadAttention",
    "RMSNorm",
    "RotaryEmbedding",
]
