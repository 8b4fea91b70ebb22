"""envkit.detect.extensions: the real ld.so asked about the .so files a dist-info's RECORD lists."""

from __future__ import annotations

import pytest

from envkit.facts import Distribution, TorchFacts
from envkit.versions import Version

pytestmark = [pytest.mark.host_tools]  # this machine's own ld.so, on purpose


def test_the_loader_is_asked_about_the_files_of_the_record(tmp_path: object) -> None:
    """envkit.detect.extensions runs the real ld.so on the .so files a dist-info's RECORD lists."""
    import importlib.util
    import shutil
    from pathlib import Path

    from envkit.detect.extensions import extension_binaries
    from envkit.system import System

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None or not Path("/lib64/ld-linux-x86-64.so.2").exists():
        pytest.skip("needs torch and an x86_64 glibc loader")
    torch_dir = Path(spec.origin).parent
    site = Path(str(tmp_path)) / "site"
    (site / "flash_attn").mkdir(parents=True)
    shutil.copy(torch_dir / "lib" / "libshm.so", site / "flash_attn" / "_ext.so")  # a .so that links libc10
    info = site / "flash_attn-2.8.3.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("flash_attn/_ext.so,sha256=x,1\nflash_attn-2.8.3.dist-info/RECORD,,\n")
    torch = TorchFacts(
        version=Version("2.13.0"),
        location=str(torch_dir),
        distributions=(Distribution("flash-attn", Version("2.8.3"), str(site)),),
    )
    (binary,) = extension_binaries(System(), torch, None, frozenset({"flash-attn"}))
    assert binary.file == str(site / "flash_attn" / "_ext.so")
    assert "libc10.so" in binary.needed and binary.undefined == () and binary.not_found == ()
