"""Jetson (Tegra) boards: the Linux for Tegra release in ``/etc/nv_tegra_release``.

The file's first line reads ``# R36 (release), REVISION: 4.3, GCID: …, BOARD: generic, EABI:
aarch64, DATE: …`` on L4T 36.4.3 (JetPack 6.2); the release and revision make the L4T version
that NVIDIA's JetPack tables key on (developer.nvidia.com/embedded/jetson-linux-archive). The file
exists on Jetsons only; elsewhere the answer is None.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, Optional

if TYPE_CHECKING:
    from envkit.system import System

__all__ = ["NV_TEGRA_RELEASE", "parse_nv_tegra_release", "read_l4t"]

NV_TEGRA_RELEASE: Final = "/etc/nv_tegra_release"
_LINE: Final = re.compile(r"#\s*R(\d{1,3})\s*\(release\),\s*REVISION:\s*(\d{1,3}(?:\.\d{1,3})?)")


def parse_nv_tegra_release(text: str) -> Optional[str]:
    """ "36.4.3" from ``# R36 (release), REVISION: 4.3, …``; None for anything else.

    >>> parse_nv_tegra_release("# R35 (release), REVISION: 3.1, GCID: 32827747, BOARD: t186ref")
    '35.3.1'
    """
    match = _LINE.search(text[:4096])
    return f"{match.group(1)}.{match.group(2)}" if match else None


def read_l4t(system: System) -> Optional[str]:
    try:
        return parse_nv_tegra_release(system.read_text(NV_TEGRA_RELEASE))
    except (OSError, ValueError):
        return None
