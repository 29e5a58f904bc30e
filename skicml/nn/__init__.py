"""Building blocks shared by several skicml models."""

from .attention import BlockStack, InducedSelfAttentionBlock, MultiheadAttentionBlock, PackedMultiheadAttention
from .cross_attention import CrossAttention, CrossAttentionBlock
from .diffusion import DDPMSchedule, RectifiedFlow
from .dit import DiTBlock, DiTFinalLayer, LabelEmbedder, TimestepEmbedder
from .mamba2 import BidirectionalMamba2Layer, Mamba2Mixer
from .moe import ExpertRaceMoE
from .norm import RMSNorm
from .rope import RotaryEmbedding
from .ssmax import QASSMax, SSMax, SSMaxMLP, scalable_softmax
from .transformer import LlamaBlock

__all__ = [
    "BidirectionalMamba2Layer",
    "BlockStack",
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
    "QASSMax",
    "RMSNorm",
    "RectifiedFlow",
    "RotaryEmbedding",
    "SSMax",
    "SSMaxMLP",
    "TimestepEmbedder",
    "scalable_softmax",
]
