"""Utilities shared across skicml: estimator discovery and test support."""

from .discovery import all_estimators

__all__ = ["all_estimators"]
