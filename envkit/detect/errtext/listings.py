"""The listings people paste beside an error: ``pip list``, ``pip freeze``, ``conda list``,
``nvidia-smi``, ``nvcc --version``, ``python -m xformers.info``, the environment block of vLLM's
``collect_env`` and its "vLLM Version" line.

Each is recognised by its own header or line shape, never by position: an issue body holds them in
any order, between prose. What each prints is its tool's format:

- ``pip list``: a "Package  Version" header over a dashed rule, one "name version [location]" row
  each (pip src/pip/_internal/commands/list.py, ``format_for_columns``);
- ``pip freeze``: "name==version", "name @ url" (pip src/pip/_internal/operations/freeze.py);
- ``conda list``: "# packages in environment at …" and "# Name Version Build Channel", one row
  per package; a pip-installed one has build "pypi_0" and channel "pypi";
- ``nvidia-smi``: the banner "NVIDIA-SMI 535.104.05  Driver Version: 535.104.05  CUDA Version:
  12.2", a "|   0  NVIDIA A100-SXM4-80GB  On  |" row per GPU, and the Processes table;
- ``nvcc --version``: "Cuda compilation tools, release 12.1, V12.1.105";
- ``xformers.info`` (facebookresearch/xformers xformers/info.py): "key: value" lines such as
  "pytorch.version", "build.torch_version", "gpu.name", "gpu.compute_capability".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Optional

from envkit.detect.driver import parse_nvidia_smi_header, parse_proc_version
from envkit.detect.host import relevant_env
from envkit.detect.toolkit import parse_nvcc_version
from envkit.facts import CondaPackage, Distribution
from envkit.versions import NvVersion, Version, parse_compute_capability, parse_version

__all__ = ["Listings", "read_listings"]

_NAME: Final = r"[A-Za-z0-9][A-Za-z0-9._\-]*"
_VERSION: Final = r"v?\d+(?:\.\d+)*(?:[A-Za-z0-9.+!_\-]*)"
_PIP_HEADER_RE: Final = re.compile(r"^\s*Package\s+Version(?:\s|$)")
_RULE_RE: Final = re.compile(r"^\s*-{3,}(?:\s+-{3,})+\s*$")
_PIP_ROW_RE: Final = re.compile(
    rf"^\s*(?P<name>{_NAME})\s+(?P<version>{_VERSION})(?:\s+(?P<where>/\S*))?\s*$"
)
_FREEZE_RE: Final = re.compile(
    rf"^\s*(?:[-*]\s+)?(?P<name>{_NAME})\s*(?:==\s*(?P<version>{_VERSION})|\s@\s+\S+)\s*$"
)
_CONDA_HEADER_RE: Final = re.compile(r"^\s*#\s*(?:packages in environment at|Name\s+Version\s+Build)", re.I)
_CONDA_ROW_RE: Final = re.compile(
    rf"^\s*(?P<name>{_NAME})\s+(?P<version>{_VERSION})\s+(?P<build>\S+)(?:\s+(?P<channel>\S+))?\s*$"
)
_SMI_BANNER_RE: Final = re.compile(r"NVIDIA-SMI\s+[\d.]+\s+(?:Driver Version|KMD Version)\s*:", re.I)
# "|   0  NVIDIA A100-SXM4-80GB          On  |   00000000:07:00.0 Off |"
_SMI_GPU_RE: Final = re.compile(
    r"^\|\s+(?P<index>\d+)\s+(?P<name>\S.*?)\s+(?:On|Off)\s+\|\s+[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
)
# Processes table: "|    0   N/A  N/A     12345      C   python        20480MiB |"
_SMI_PROC_RE: Final = re.compile(
    r"^\|\s+(?P<gpu>\d+)\s+(?:\S+\s+\S+\s+)?(?P<pid>\d+)\s+(?:C|G|C\+G)\s+(?P<name>.*?)\s+(?P<mib>\d+)MiB\s*\|"
)
_NVCC_RE: Final = re.compile(r"Cuda compilation tools, release")
_XF_RE: Final = re.compile(r"^\s*(?P<key>[a-z][a-z0-9_.]*[a-z0-9])\s*:\s+(?P<value>\S.*?)\s*$")
_XF_TITLE_RE: Final = re.compile(r"^\s*xFormers\s+(?P<version>\d\S*)\s*$")
_VLLM_RE: Final = re.compile(r"^\s*vLLM Version\s*:\s*(?P<version>\d\S*)", re.I)
_ENV_RE: Final = re.compile(r"^\s*(?P<name>[A-Z][A-Z0-9_]{1,63})=(?P<value>\S*)\s*$")
# `pip show`: "Name: torch" then "Version: 2.4.0+cu121" (pip src/pip/_internal/commands/show.py)
_SHOW_NAME_RE: Final = re.compile(rf"^\s*Name:\s+(?P<name>{_NAME})\s*$")
_SHOW_VERSION_RE: Final = re.compile(rf"^\s*Version:\s+(?P<version>{_VERSION})\s*$")
# ldd: "\tlibnvJitLink.so.12 => /usr/local/cuda-12.1/lib64/libnvJitLink.so.12 (0x00007…)"
_LDD_RE: Final = re.compile(r"^\s*(?P<soname>lib[\w+.-]+\.so[\w.]*) => (?P<path>/\S+) \(0x[0-9a-f]+\)\s*$")
# What people print to check CUDA: `print("CUDA available:", torch.cuda.is_available())`,
# `torch.cuda.is_available(): False` (collect_env's own "Is CUDA available" is read with its report).
_AVAILABLE_RE: Final = re.compile(
    r"^\s*(?:torch\.cuda\.is_available\(\)|CUDA available)\s*[:=]?\s*(?P<value>True|False)\s*$", re.I
)
# Debian's `apt list --installed` / `dpkg -l`: "libnccl2/unknown,now 2.8.4-1+cuda11.2 amd64 [installed]"
_APT_NCCL_RE: Final = re.compile(
    r"^\s*(?:ii\s+)?libnccl2(?:/\S+|:\w+)?\s+(?P<version>\d+\.\d+\.\d+)-\d+\+cuda(?P<cuda>\d+\.\d+)"
)


@dataclass
class Listings:
    """What the listings in a text say (each list only what was there)."""

    read: list[str] = field(default_factory=list)  # the kinds found: "pip list", "nvidia-smi", …
    distributions: dict[str, Distribution] = field(default_factory=dict)
    conda: list[CondaPackage] = field(default_factory=list)
    driver: Optional[NvVersion] = None
    driver_cuda: Optional[Version] = None
    gpus: list[tuple[int, str]] = field(default_factory=list)  # (index, name)
    gpu_cc: dict[str, str] = field(default_factory=dict)  # name -> "8.6" (xformers.info)
    processes: list[tuple[int, int, float]] = field(default_factory=list)  # (gpu, pid, MiB)
    nvcc: Optional[Version] = None
    env: dict[str, str] = field(default_factory=dict)
    xformers: dict[str, str] = field(default_factory=dict)  # xformers.info's keys
    ldd: list[tuple[str, str]] = field(default_factory=list)  # (soname, the path ldd resolved it to)
    nccl: Optional[tuple[Version, Optional[Version]]] = None  # a system libnccl2 package and its CUDA
    cuda_available: Optional[bool] = None  # a printed torch.cuda.is_available()

    def saw(self, kind: str) -> None:
        if kind not in self.read:
            self.read.append(kind)

    def add(self, name: str, version: Optional[str]) -> None:
        dist = Distribution(name, parse_version(version) if version else None)
        self.distributions.setdefault(dist.name, dist)


def read_listings(lines: list[str]) -> Listings:
    """Every listing in the cleaned lines."""
    found = Listings()
    mode: Optional[str] = None  # "pip" after pip list's rule, "conda" after conda's header
    env_run: list[tuple[str, str]] = []
    shown: Optional[str] = None  # the "Name:" of a `pip show` block, until its "Version:"
    echo_ld = False  # the line before was `echo $LD_LIBRARY_PATH`: this one is its value
    for raw in lines:
        line = raw.rstrip()
        if echo_ld and line.strip():
            echo_ld = False
            if line.strip().startswith("/"):
                found.env.setdefault("LD_LIBRARY_PATH", line.strip())
                found.saw("environment variables")
                continue
        if line.rstrip().endswith("echo $LD_LIBRARY_PATH"):
            echo_ld = True
            continue
        if "Name:" in line or (shown and "Version:" in line):
            named = _SHOW_NAME_RE.match(line)
            if named is not None:
                shown = named.group("name")
                continue
            version = _SHOW_VERSION_RE.match(line)
            if shown and version is not None:
                found.add(shown, version.group("version"))
                found.saw("pip show")
                shown = None
                continue
        if not line.strip():
            mode = None if mode == "pip-header" else mode
            _flush_env(env_run, found)
            continue
        if "Package" in line and _PIP_HEADER_RE.match(line):
            mode = "pip-header"
            continue
        if mode == "pip-header" and _RULE_RE.match(line):
            mode = "pip"
            found.saw("pip list")
            continue
        if "#" in line and _CONDA_HEADER_RE.match(line):
            mode = "conda"
            found.saw("conda list")
            continue
        env = _ENV_RE.match(line) if "=" in line else None
        if env is not None:
            env_run.append((env.group("name"), env.group("value")))
            continue
        _flush_env(env_run, found)
        if mode == "pip":
            row = _PIP_ROW_RE.match(line)
            if row is not None:
                found.add(row.group("name"), row.group("version"))
                continue
            mode = None
        if mode == "conda" and not line.lstrip().startswith("#"):
            row = _CONDA_ROW_RE.match(line)
            if row is not None:
                _conda_row(found, row)
                continue
            mode = None
        _one_line(found, line)
    _flush_env(env_run, found)
    return found


def _conda_row(found: Listings, row: re.Match[str]) -> None:
    name, version = row.group("name"), row.group("version")
    build, channel = row.group("build"), row.group("channel")
    if channel in ("pypi", "<pip>") or build in ("pypi_0", "<pip>"):
        found.add(name, version)  # pip installed it: a distribution, not a conda package
        return
    found.conda.append(CondaPackage(name, parse_version(version), build, channel))


def _one_line(found: Listings, line: str) -> None:
    """The listings recognised by a line of their own (each regex behind a cheap test: a long log
    is mostly lines that are none of these)."""
    if line.lstrip().startswith("|") or "NVIDIA-SMI" in line:
        _smi_line(found, line)
        return
    if "NVRM version:" in line:
        loaded, _module = parse_proc_version(line[line.index("NVRM version:") :])
        if loaded is not None:
            found.driver = found.driver or loaded
            found.saw("/proc/driver/nvidia/version")
        return
    if " => /" in line:
        ldd = _LDD_RE.match(line)
        if ldd is not None:
            found.ldd.append((ldd.group("soname"), ldd.group("path")))
            found.saw("ldd")
        return
    if "libnccl2" in line:
        apt = _APT_NCCL_RE.match(line)
        if apt is not None:
            nccl = parse_version(apt.group("version"))
            if nccl is not None:
                found.nccl = (nccl, parse_version(apt.group("cuda")))
                found.saw("system packages")
        return
    if "available" in line:
        printed = _AVAILABLE_RE.match(line)
        if printed is not None:
            found.cuda_available = printed.group("value").lower() == "true"
            found.saw("torch.cuda.is_available()")
            return
    if "Cuda compilation tools" in line:
        nvcc, _build = parse_nvcc_version(line)
        if nvcc is not None:
            found.nvcc = found.nvcc or nvcc
            found.saw("nvcc --version")
        return
    if "vLLM" in line or "vllm" in line:
        vllm = _VLLM_RE.match(line)
        if vllm is not None:
            found.add("vllm", vllm.group("version"))
            found.saw("vLLM collect_env")
            return
    if "xFormers" in line:
        title = _XF_TITLE_RE.match(line)
        if title is not None:
            found.add("xformers", title.group("version"))
            found.saw("xformers.info")
            return
    if ("build." in line or "gpu." in line or "pytorch." in line) and ":" in line:
        pair = _XF_RE.match(line)
        if pair is not None and pair.group("key").startswith(("pytorch.", "build.", "gpu.")):
            found.xformers.setdefault(pair.group("key"), pair.group("value"))
            _xformers(found)
            return
    if "==" in line or " @ " in line:
        freeze = _FREEZE_RE.match(line)
        if freeze is not None:
            found.add(freeze.group("name"), freeze.group("version"))
            found.saw("pip freeze")


def _smi_line(found: Listings, line: str) -> None:
    """A line of nvidia-smi's table: the banner, a GPU's row, a process's row."""
    if _SMI_BANNER_RE.search(line):
        header = parse_nvidia_smi_header(line)
        found.driver = found.driver or header.driver
        found.driver_cuda = found.driver_cuda or header.cuda
        found.saw("nvidia-smi")
        return
    gpu = _SMI_GPU_RE.match(line)
    if gpu is not None:
        name = gpu.group("name").strip()
        if not name.endswith("..."):  # an old banner cuts long names: "NVIDIA GeForce ..."
            found.gpus.append((int(gpu.group("index")), name))
        return
    proc = _SMI_PROC_RE.match(line)
    if proc is not None:
        found.processes.append((int(proc.group("gpu")), int(proc.group("pid")), float(proc.group("mib"))))


def _xformers(found: Listings) -> None:
    info = found.xformers
    name, cc = info.get("gpu.name"), info.get("gpu.compute_capability")
    if name and cc and parse_compute_capability(cc) is not None:
        found.gpu_cc[name] = cc


def _flush_env(run: list[tuple[str, str]], found: Listings) -> None:
    """A run of NAME=value lines (vLLM's collect_env prints the variables it cares about, one a
    line): the relevant ones are facts, with secret-like names left out (envkit.redact)."""
    if len(run) >= 2 or any(name in ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES") for name, _ in run):
        found.env.update(relevant_env(dict(run)))
        found.saw("environment variables")
    run.clear()


def xformers_built_for(found: Listings) -> Optional[tuple[Version, Optional[Version]]]:
    """(the torch xformers was built for, the torch installed) from xformers.info; None unless both
    the build's torch is there."""
    built = parse_version(found.xformers.get("build.torch_version", ""))
    if built is None:
        return None
    return built, parse_version(found.xformers.get("pytorch.version", ""))
