"""CUDA_VISIBLE_DEVICES: which physical GPUs a CUDA process will see, and under which index.

CUDA reads the list left to right and stops at the first entry it cannot use; entries are indices
or (prefixes of) GPU UUIDs; an empty value hides every GPU (CUDA C Programming Guide, "CUDA
Environment Variables"). NVML numbers GPUs in PCI bus order, as CUDA does with
CUDA_DEVICE_ORDER=PCI_BUS_ID; CUDA's default order (fastest first) can differ on mixed machines.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.facts import GpuFacts

__all__ = ["apply_visibility"]


def _match(token: str, gpus: Sequence[GpuFacts]) -> Optional[GpuFacts]:
    if token.isdigit():
        index = int(token)
        return next((g for g in gpus if g.index == index), None)
    if token.startswith("GPU-"):
        hits = [g for g in gpus if g.uuid and g.uuid.startswith(token)]
        return hits[0] if len(hits) == 1 else None
    return None


def apply_visibility(
    gpus: Sequence[GpuFacts], value: Optional[str]
) -> tuple[tuple[GpuFacts, ...], tuple[str, ...]]:
    """Mark each GPU visible or not and give visible ones their CUDA index.

    Returns the GPUs and notes on entries CUDA would stop at.
    """
    if value is None:
        return tuple(dataclasses.replace(g, visible=True, cuda_index=i) for i, g in enumerate(gpus)), ()
    notes: list[str] = []
    order: list[int] = []
    for raw in value.split(","):
        token = raw.strip()
        if token.startswith("MIG-"):
            notes.append(f"CUDA_VISIBLE_DEVICES entry {token!r} is a MIG instance; its GPU is not resolved")
            break
        gpu = _match(token, gpus)
        if gpu is None or gpu.index in order:
            if token:
                notes.append(
                    f"CUDA_VISIBLE_DEVICES={value!r}: CUDA stops at {token!r} (no such GPU); "
                    "later entries are ignored"
                )
            break
        order.append(gpu.index)
    marked = tuple(
        dataclasses.replace(
            g,
            visible=g.index in order,
            cuda_index=order.index(g.index) if g.index in order else None,
        )
        for g in gpus
    )
    return marked, tuple(notes)
