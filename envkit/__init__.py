"""envkit: get PyTorch 2 working on NVIDIA GPUs, and prove it."""

from __future__ import annotations

__version__ = "0.1.0"
