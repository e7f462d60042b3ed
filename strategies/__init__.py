"""Hypothesis strategies for /v1/completions requests, derived from a Spec."""

from strategies._draw import draw
from strategies._requests import valid_requests

__all__ = ["draw", "valid_requests"]
