"""Building blocks shared by several skicml models."""

from .norm import RMSNorm

__all__ = ["RMSNorm"]
