"""Error text as input: a traceback, a log, or an issue body that mixes one with listings, read into
Facts (``envkit doctor --from FILE`` and ``--error FILE``).

A tolerant reader in the manner of envkit.detect.collect_env: the text is cleaned of what terminals,
rich and mail clients add (clean.py), every listing in it is read by its own shape (listings.py),
torch's CUDA messages by envkit.detect.torch_messages, the loader's failures (linker.py) and the
other families (families.py) by where they are produced. What the text does not say is unknown
(``Facts.unknown``): the checks that need it skip and say what to run. Nothing here raises; a text
with nothing envkit knows gives a reading whose ``known`` is False, and doctor says so.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Optional

from envkit.detect.collect_env import looks_like_collect_env, parse_collect_env
from envkit.detect.errtext.clean import blob, clean_lines
from envkit.detect.errtext.families import find_events, find_nccl, find_oom, nccl_version_in, nvml_error
from envkit.detect.errtext.linker import find_load_failures, python_version_in_paths
from envkit.detect.errtext.listings import Listings, read_listings, xformers_built_for
from envkit.detect.host import lib_family
from envkit.detect.torch_messages import read_torch_messages, with_messages
from envkit.facts import (
    DeepTorchFacts,
    DriverFacts,
    ErrorFacts,
    Facts,
    GpuFacts,
    HostFacts,
    LoadFailure,
    PythonFacts,
    SharedLib,
    ToolkitFacts,
    TorchFacts,
)
from envkit.versions import parse_compute_capability, parse_version

if TYPE_CHECKING:
    from envkit.detect.torch_messages import TorchMessages
    from envkit.versions import Version

__all__ = ["READS", "SOURCE", "TextReading", "read_error_text", "with_error_text"]

SOURCE: Final = "error text"
# What the reader understands, for the one-line answer to a text it does not.
READS: Final = (
    "envkit JSON reports, `python -m torch.utils.collect_env` output, tracebacks and logs with "
    "CUDA / loader / NCCL / NVML / triton errors, pip list / pip freeze / conda list, nvidia-smi, "
    "nvcc --version, python -m xformers.info, vLLM's collect_env"
)
# Every Facts field a text may leave out; what it does report is taken off.
_ALL_UNKNOWN: Final = (
    "gpus",
    "driver.version",
    "torch.version",
    "torch.cuda",
    "torch.deep",
    "torch.distributions",
    "torch.conda_packages",
    "toolkits",
    "python.version",
    "host.cuda_libs",
    "container",
)
_TRACEBACK_RE: Final = re.compile(
    r"Traceback \(most recent call last\)|^\s*\w+(?:\.\w+)*(?:Error|Exception): ", re.M
)
# collect_env's labels (envkit.detect.collect_env._LABELS, lower case): its line-by-line test only
# runs where one is.
_COLLECT_ENV_WORDS: Final = (
    "pytorch version",
    "cuda used to build",
    "is cuda available",
    "python version",
    "gpu models",
    "[pip",
    "[conda]",
)
_PLATFORM_RE: Final = re.compile(r"\.cpython-3\d+t?-(?P<arch>x86_64|aarch64|ppc64le)-linux-gnu")


@dataclass(frozen=True)
class TextReading:
    """What a text says: its Facts, the kinds of thing it held, and whether any was one envkit
    knows (a report, a listing, an error of a known family)."""

    facts: Facts
    read: tuple[str, ...]
    known: bool


def read_error_text(text: str) -> TextReading:
    """Read a traceback, log or issue body. Never raises: a reader bug becomes a note."""
    try:
        return _read(text)
    except Exception as exc:  # noqa: BLE001 -- pasted text must never crash doctor; say what happened
        note = f"the text could not be read: {type(exc).__name__}: {exc}"
        return TextReading(Facts(notes=(note,)), (), False)


def _read(text: str) -> TextReading:
    lines = clean_lines(text)
    flat = blob(lines)
    listings = read_listings(lines)
    messages = read_torch_messages([flat])
    errors = ErrorFacts(
        events=find_events(flat),
        load_failures=find_load_failures(flat) + _built_for(listings, flat),
        oom=find_oom(flat),
        nccl=find_nccl(flat),
    )
    nvml = nvml_error(flat)
    cleaned = "\n".join(lines)
    read = list(listings.read)
    lowered = cleaned.lower()
    if any(word in lowered for word in _COLLECT_ENV_WORDS) and looks_like_collect_env(cleaned):
        read.insert(0, "collect_env")
        facts = _with_listings(parse_collect_env(cleaned), listings)
    else:
        facts = _from_listings(listings, messages, flat)
    if "Traceback (most recent call last)" in cleaned or (
        ("Error: " in cleaned or "Exception: " in cleaned) and _TRACEBACK_RE.search(cleaned)
    ):
        read.append("traceback")
    spoke = bool(
        errors.events or errors.load_failures or errors.oom or errors.nccl or nvml or facts.torch.spoke
    )
    if spoke and "traceback" not in read:
        read.append("log")
    nccl = nccl_version_in(flat) or listings.nccl
    facts = dataclasses.replace(
        facts,
        errors=dataclasses.replace(
            errors,
            read=tuple(read),
            nccl_version=nccl[0] if nccl else None,
            nccl_cuda=nccl[1] if nccl else None,
        ),
        driver=dataclasses.replace(facts.driver, nvml_error=facts.driver.nvml_error or nvml),
    )
    evidence = _torch_cuda_file(errors.load_failures)
    if evidence is not None and facts.torch.cuda is None:
        facts = dataclasses.replace(
            facts, torch=dataclasses.replace(facts.torch, cuda_build_evidence=evidence)
        )
    known = bool(set(read) - {"traceback"}) or spoke
    return TextReading(facts, tuple(read), known)


# torch's own CUDA libraries: libtorch_cuda / libc10_cuda in torch/lib, or a library of its nvidia-*
# wheels (site-packages/nvidia/<lib>/lib, the nvidia/cu13/lib of CUDA 13 builds).
_TORCH_CUDA_FILE_RE: Final = re.compile(
    r"(?:/torch/lib/lib(?:torch_cuda|c10_cuda)[\w.]*\.so|/site-packages/nvidia/[\w.-]+/lib/lib[\w.+-]+\.so)"
)


def _torch_cuda_file(failures: tuple[LoadFailure, ...]) -> Optional[str]:
    """The first failed load in torch's own CUDA libraries: only a CUDA build loads them."""
    for failure in failures:
        for path in (failure.file, failure.library):
            if path and _TORCH_CUDA_FILE_RE.search(posixpath.normpath(path)):
                return path
    return None


def _built_for(listings: Listings, flat: str) -> tuple[LoadFailure, ...]:
    """xformers' own word on the torch it was built for: xformers.info's build.torch_version, and
    its warning "xFormers was built for: PyTorch 2.1.0+cu121 with CUDA 1201 (you have 2.2.0+cu121)"
    (facebookresearch/xformers xformers/_cpp_lib.py)."""
    pair = xformers_built_for(listings)
    warned = re.search(
        r"xFormers was built for: PyTorch (?P<built>\S+) with CUDA \d+ \(you have (?P<have>[^)\s]+)\)", flat
    )
    if warned is not None:
        built, have = parse_version(warned.group("built")), parse_version(warned.group("have"))
        pair = (built, have) if built is not None else pair
    if pair is None or pair[1] is None or pair[0] == pair[1]:
        return ()
    return (LoadFailure("built_for", "xformers", package="xformers", provider="torch", needs=pair[0]),)


def _gpus(listings: Listings) -> tuple[GpuFacts, ...]:
    from envkit.knowledge import load_knowledge

    knowledge = load_knowledge()
    named = list(listings.gpus) or [(i, name) for i, name in enumerate(listings.gpu_cc)]
    gpus = []
    for index, name in named:
        known = knowledge.gpu_named(name)
        cc = known.cc if known else parse_compute_capability(listings.gpu_cc.get(name, ""))
        gpus.append(GpuFacts(index=index, name=name, compute_capability=cc, source=SOURCE))
    return tuple(gpus)


# The CUDA in a conda pytorch build string: the pytorch channel's "py3.11_cuda12.4_cudnn9.1.0_0",
# conda-forge's "cuda126_generic_py311_h…" / "cuda120_py311h…"; "cpu_…", "py3.11_cpu_0": none.
_CONDA_CUDA_RE: Final = re.compile(r"(?:^|_)cuda(?:(?P<dotted>\d+\.\d+)|(?P<digits>\d{3}))(?:_|$)")


def conda_build_cuda(build: str) -> Optional[Version]:
    """The CUDA a conda pytorch build was made with, from its build string; None for a CPU build.

    >>> conda_build_cuda("py3.11_cuda12.4_cudnn9.1.0_0"), conda_build_cuda("cuda126_generic_py311_h1")
    (<Version('12.4')>, <Version('12.6')>)
    >>> conda_build_cuda("py3.11_cpu_0") is None
    True
    """
    found = _CONDA_CUDA_RE.search(build or "")
    if found is None:
        return None
    digits = found.group("digits")
    return parse_version(found.group("dotted") or f"{digits[:-1]}.{digits[-1]}")


def _torch_from(listings: Listings, messages: TorchMessages) -> TorchFacts:
    dists = tuple(sorted(listings.distributions.values(), key=lambda d: d.name))
    version = next((d.version for d in dists if d.name == "torch"), None)
    version = version or next((p.version for p in listings.conda if p.name == "pytorch"), None)
    cuda = None
    if (
        version is not None
        and version.local
        and version.local.startswith("cu")
        and version.local[2:].isdigit()
    ):
        digits = version.local[2:]
        cuda = parse_version(f"{digits[:-1]}.{digits[-1]}")  # cu121 -> 12.1, cu130 -> 13.0
    conda_torch = next((p for p in listings.conda if p.name == "pytorch"), None)
    if cuda is None and conda_torch is not None:
        cuda = conda_build_cuda(conda_torch.build)
    deep = None
    available = listings.xformers.get("pytorch.cuda")
    if available in ("available", "unavailable"):
        deep = DeepTorchFacts(ok=True, version=version, cuda_available=available == "available")
    elif listings.cuda_available is not None:
        deep = DeepTorchFacts(ok=True, version=version, cuda_available=listings.cuda_available)
    return with_messages(
        TorchFacts(
            version=version, cuda=cuda, distributions=dists, conda_packages=tuple(listings.conda), deep=deep
        ),
        messages,
    )


def _from_listings(listings: Listings, messages: TorchMessages, flat: str) -> Facts:
    """Facts of a text without a collect_env report: what its listings and paths show."""
    gpus = _gpus(listings)
    torch = _torch_from(listings, messages)
    py_version = python_version_in_paths(flat)
    # A `conda list` names the environment's Python ("python  3.11.9  h955ad1f_0").
    conda_python = next((p.version for p in listings.conda if p.name == "python"), None)
    py_version = py_version or conda_python
    arch = _PLATFORM_RE.search(flat)
    python = None
    if py_version is not None or arch is not None:
        python = PythonFacts(
            executable="python",
            selected_by=SOURCE,
            version=py_version,
            platform=f"linux-{arch.group('arch')}" if arch else None,
        )
    toolkits = (
        (ToolkitFacts(nvcc="nvcc", version=listings.nvcc, sources=(SOURCE,), on_path=True),)
        if listings.nvcc
        else ()
    )
    reported = set()
    if gpus:
        reported.add("gpus")
    if listings.driver is not None:
        reported.add("driver.version")
    if torch.version is not None:
        reported.add("torch.version")
        if torch.version.local:
            reported.add("torch.cuda")
    if torch.deep is not None:
        reported.add("torch.deep")
    if {"pip list", "pip freeze", "conda list"} & set(listings.read):
        reported.update(("torch.distributions", "torch.conda_packages"))
    if toolkits:
        reported.add("toolkits")
    if py_version is not None:
        reported.add("python.version")
    host = HostFacts(
        env=listings.env,
        cuda_libs=_ldd_libs(listings),
        unanswered=() if "LD_LIBRARY_PATH" in listings.env else ("env",),
    )
    return Facts(
        host=host,
        driver=DriverFacts(
            version=listings.driver,
            cuda_version=listings.driver_cuda,
            source="nvidia-smi" if listings.driver else None,
        ),
        gpus=gpus,
        toolkits=toolkits,
        python=python,
        torch=torch,
        unknown=tuple(p for p in _ALL_UNKNOWN if p not in reported),
        notes=(f"read from pasted text ({SOURCE}): what it does not show is unknown",),
    )


def _ldd_libs(listings: Listings) -> tuple[SharedLib, ...]:
    """The CUDA libraries `ldd` said the loader resolves, where it found them."""
    libs = []
    for soname, path in listings.ldd:
        family = lib_family(soname)
        if family is not None:
            libs.append(SharedLib(path, family[0], parse_version(family[1] or ""), "ldd"))
    return tuple(libs)


def _with_listings(facts: Facts, listings: Listings) -> Facts:
    """A collect_env report's facts with what the listings beside it add (the report wins)."""
    unknown = set(facts.unknown)
    torch = facts.torch
    if listings.distributions and not torch.distributions:
        torch = dataclasses.replace(torch, distributions=tuple(listings.distributions.values()))
        unknown -= {"torch.distributions"}
    if listings.conda and not torch.conda_packages:
        torch = dataclasses.replace(torch, conda_packages=tuple(listings.conda))
        unknown -= {"torch.conda_packages"}
    driver = facts.driver
    if driver.version is None and listings.driver is not None:
        driver = DriverFacts(version=listings.driver, cuda_version=listings.driver_cuda, source="nvidia-smi")
        unknown -= {"driver.version"}
    gpus = facts.gpus or _gpus(listings)
    if gpus:
        unknown -= {"gpus"}
    host = dataclasses.replace(facts.host, cuda_libs=(*facts.host.cuda_libs, *_ldd_libs(listings)))
    if listings.env:
        env = {**listings.env, **host.env}
        unanswered = tuple(u for u in host.unanswered if u != "env" or "LD_LIBRARY_PATH" not in env)
        host = dataclasses.replace(host, env=env, unanswered=unanswered)
    return dataclasses.replace(
        facts,
        torch=torch,
        driver=driver,
        gpus=gpus,
        host=host,
        unknown=tuple(u for u in facts.unknown if u in unknown),
    )


def with_error_text(live: Facts, said: Facts, where: str) -> Facts:
    """This machine's facts joined with an error text's (``doctor --error``): the machine's own
    detection stands; the text adds its errors, torch's messages and NVML's error, and a note where
    the two disagree (the error may come from another interpreter or another node)."""
    notes = [f"joined with the error text {where} ({', '.join(said.errors.read) or 'nothing recognised'})"]
    if said.python is not None and said.python.version is not None and live.python is not None:
        theirs, mine = said.python.version, live.python.version
        if mine is not None and (theirs.major, theirs.minor) != (mine.major, mine.minor):
            notes.append(
                f"the error text's paths are Python {theirs}'s; the inspected interpreter is Python {mine}: "
                "pass --python with the interpreter that failed"
            )
    if (
        said.torch.version is not None
        and live.torch.version is not None
        and said.torch.version != live.torch.version
    ):
        notes.append(
            f"the error text names torch {said.torch.version}; installed here: torch {live.torch.version}"
        )
    torch = dataclasses.replace(
        live.torch,
        cuda_init_error=live.torch.cuda_init_error or said.torch.cuda_init_error,
        cuda_init_message=live.torch.cuda_init_message or said.torch.cuda_init_message,
        reported_driver_cuda=live.torch.reported_driver_cuda or said.torch.reported_driver_cuda,
        supported_arches=live.torch.supported_arches or said.torch.supported_arches,
        supported_cc_min=live.torch.supported_cc_min or said.torch.supported_cc_min,
        supported_cc_max=live.torch.supported_cc_max or said.torch.supported_cc_max,
        incompatible_gpus=live.torch.incompatible_gpus or said.torch.incompatible_gpus,
    )
    driver = dataclasses.replace(live.driver, nvml_error=live.driver.nvml_error or said.driver.nvml_error)
    return dataclasses.replace(
        live, torch=torch, driver=driver, errors=said.errors, notes=(*live.notes, *notes)
    )
