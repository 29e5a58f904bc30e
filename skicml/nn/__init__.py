"""Building blocks shared by several skicml models."""

from .attention import InducedSelfAttentionBlock, MultiheadAttentionBlock, PackedMultiheadAttention
from .cross_attention import CrossAttention, CrossAttentionBlock
from .diffusion import DDPMSchedule, RectifiedFlow
from .dit import DiTBlock, DiTFinalLayer, LabelEmbedder, TimestepEmbedder
from .mamba2 import BidirectionalMamba2Layer, Mamba2Mixer
from .moe import ExpertRaceMoE
from .norm import RMSNorm
from .rope import RotaryEmbedding
from .transformer import LlamaBlock

__all__ = [
    "BidirectionalMamba2Layer",
    "CrossAttention",
    "CrossAttentionBlock",
    "DDPMSchedule",
    "DiTBlock",
    "DiTFinalLayer",
    "ExpertRaceMoE",
    "InducedSelfAttentionBlock",
    "LabelEmbedder",
    "LlamaBlock",
    "Mamba2Mixer",
    "MultiheadAttentionBlock",
    "PackedMultiheadAttention",
    "RMSNorm",
    "RectifiedFlow",
    "RotaryEmbedding",
    "TimestepEmbedder",
]
