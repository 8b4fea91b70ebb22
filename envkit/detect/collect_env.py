"""Pasted ``python -m torch.utils.collect_env`` output, read into Facts.

People paste collect_env's report into issue trackers (PyTorch's bug template asks for it), so
``envkit doctor --from FILE`` can diagnose a machine it never saw. The report is text only (no JSON:
main() prints get_pretty_env_info(), pytorch/pytorch:torch/utils/collect_env.py@v2.11.0) and its
labels changed over the releases: 1.x printed "Is debug build:
No" and "Python version: 3.7", no ROCm/libc/platform lines and ``[pip] numpy (1.15.1)`` in the oldest
format; 2.x added "Python platform", "CUDA_MODULE_LOADING set to", the CPU block and more. What
reaches envkit has also been through a browser or a mail client: quoted ("> "), indented, fenced,
hard-wrapped, CRLF, wrapped in ``<details>``, cut short, with chatter and warnings around it.

So the reader is line based and forgiving: a line is a field when it starts with a known label,
anything else continues the previous field (hard wraps, list items) until a blank line. Values are
read from their start, so text glued on by a wrap does not change them. It never raises; what it
could not read becomes a note. What collect_env prints, and where it gets it, is torch's
torch/utils/collect_env.py (``env_info_fmt``, ``pretty_str``): "CUDA runtime version" is
``nvcc --version``, "GPU models" is ``nvidia-smi -L``, "cuDNN version" is ``ldconfig -p``.
"""

from __future__ import annotations

import dataclasses
import html
import re
from typing import Final, Optional

from envkit.detect.host import lib_family
from envkit.detect.torch_messages import TorchMessages, read_torch_messages, with_messages
from envkit.facts import (
    AccelGpu,
    CondaPackage,
    DeepTorchFacts,
    Distribution,
    DriverFacts,
    Facts,
    GpuFacts,
    HostFacts,
    PythonFacts,
    SharedLib,
    ToolkitFacts,
    TorchFacts,
    VendorFacts,
)
from envkit.knowledge import variant_cuda
from envkit.knowledge.vendors import normalize_gfx
from envkit.versions import NvVersion, Version, parse_version

__all__ = ["SOURCE", "UNREPORTED_CHECKS", "looks_like_collect_env", "parse_collect_env"]

SOURCE: Final = "collect_env"

# Label -> key, every spelling a torch release printed (torch/utils/collect_env.py history, plus
# hand-edited pastes like "Version of relevant libraries" in pytorch/pytorch#37320).
_LABELS: Final = (
    ("torch", r"PyTorch version"),
    ("debug", r"Is debug build"),
    ("cuda_built", r"CUDA used to build PyTorch"),
    ("rocm_built", r"ROCM used to build PyTorch"),
    ("os", r"OS"),
    ("gcc", r"GCC version"),
    ("clang", r"Clang version"),
    ("cmake", r"CMake version"),
    ("libc", r"Libc version"),
    ("python", r"Python version"),
    ("platform", r"Python platform"),
    ("cuda_available", r"Is CUDA available"),
    ("nvcc", r"CUDA runtime version"),
    ("module_loading", r"CUDA_MODULE_LOADING set to"),
    ("gpus", r"GPU models and configuration"),
    ("driver", r"Nvidia driver version"),
    ("cudnn", r"cuDNN version"),
    ("xpu", r"Is XPU available"),
    ("hip_runtime", r"HIP runtime version"),
    ("miopen", r"MIOpen runtime version"),
    ("xnnpack", r"Is XNNPACK available"),
    ("allocator", r"Caching allocator config"),
    ("cpu", r"CPU"),
    ("libraries", r"Versions? of relevant libraries"),
)
# "OS" and "CPU" are short words of prose: only "OS:" / "CPU:" count. The others may lose their
# colon in hand-edited pastes ("PyTorch version 1.5.0", pytorch/pytorch#37320).
_LABEL_RE: Final = re.compile(
    "^(?:"
    + "|".join(
        f"(?P<{key}>{label}\\s*:)" if key in ("os", "cpu") else f"(?P<{key}>{label}(?:\\s*:|(?=\\s)|$))"
        for key, label in _LABELS
    )
    + r")\s*(?P<value>.*)$",
    re.IGNORECASE,
)
_KEYS: Final = tuple(key for key, _ in _LABELS)
# Values collect_env prints for "nothing": None -> "Could not collect"; "No CUDA" on machines
# without CUDA; "N/A" when torch does not import or the field does not apply.
_NOTHING: Final = frozenset({"", "none", "n/a", "could not collect", "no cuda", "no relevant packages"})
_PACKAGE_RE: Final = re.compile(r"^\[(?P<tool>pip\d*|conda)\]\s*(?P<rest>.*)$", re.IGNORECASE)
_PIP_RE: Final = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._\-]*)\s*(?:==\s*(?P<v1>\S+)|\(\s*(?P<v2>[^)\s]+)\s*\)|@\s*\S+)?\s*$"
)
_NAME_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*$")
_OTHER_LABEL_RE: Final = re.compile(r"^[A-Za-z][\w ./()\-]{1,48}:(?:\s|$)")
_SEPARATOR_RE: Final = re.compile(r"^[=\-_*#~]{3,}$")
_QUOTE_RE: Final = re.compile(r"^(?:\s*>)+\s?")
# Only the tags a paste is wrapped in; conda's "<pip>" column must survive.
_TAG_RE: Final = re.compile(
    r"</?(?:details|summary|pre|code|br|p|b|i|em|strong|tt|kbd|div|span|sub|sup|blockquote)\b[^>]*>",
    re.IGNORECASE,
)
_GPU_RE: Final = re.compile(r"GPU\s*(\d+)\s*:\s*")
_UUID_RE: Final = re.compile(r"\s*\(UUID:\s*([^)]*)\)")
# A MIG device line; the profile is "<g>g.<mem>gb" (NVIDIA MIG user guide, "Supported MIG Profiles"),
# also with a media extension ("1g.10gb+me") or "c" compute-instance prefix on newer drivers.
_MIG_RE: Final = re.compile(r"^MIG\s+(\S+)")
_ARCH_RE: Final = re.compile(
    r"(?:^|[-(\s])(x86_64|amd64|aarch64|arm64|ppc64le|s390x|i686|armv7l)(?=[-)\s]|$)", re.I
)
_WARNING_RE: Final = re.compile(r"\b\w*Warning:\s*(?P<text>.*)$")
_CONDA_PIP_CHANNELS: Final = ("pypi", "<pip>")
_FENCE_LANGS: Final = frozenset({"text", "txt", "shell", "sh", "bash", "console", "python", "plain", "log"})


def _clean(line: str) -> str:
    """One pasted line without its wrapping: HTML tags, quote markers, fences, backticks, indent."""
    line = html.unescape(_TAG_RE.sub("", line))
    line = _QUOTE_RE.sub("", line).replace("\uff1a", ":").replace("\t", " ").strip()
    line = line.strip("`").strip()
    # The rest of a fence line is a language name ("```text"); a fence glued to output is kept.
    return "" if re.fullmatch(r"[A-Za-z0-9_+\-]{1,12}", line) and line.lower() in _FENCE_LANGS else line


def _label(line: str) -> Optional[tuple[str, str]]:
    match = _LABEL_RE.match(line)
    if match is None:
        return None
    key = next(k for k in _KEYS if match.group(k) is not None)
    return key, match.group("value").strip()


def looks_like_collect_env(text: str) -> bool:
    """Whether ``text`` holds collect_env output: two of its labels (or its header and one)."""
    seen: set[str] = set()
    header = False
    for raw in text.splitlines():
        line = _clean(raw)
        header = header or line.startswith("Collecting environment information")
        found = _label(line)
        if found is not None and found[0] not in ("os", "cpu"):
            seen.add(found[0])
        elif _PACKAGE_RE.match(line):
            seen.add("packages")
        if len(seen) >= 2 or (header and seen):
            return True
    return False


class _Reader:
    """The fields, package lines and warnings of the first report in a paste."""

    def __init__(self) -> None:
        self.fields: dict[str, list[str]] = {}
        self.packages: list[tuple[str, str]] = []
        self.warnings: list[str] = []
        self.notes: list[str] = []

    def read(self, text: str) -> None:
        current: Optional[str] = None  # the field a wrapped line continues
        state = "before"  # before -> fields -> cpu -> packages -> after
        warning: Optional[list[str]] = None
        for raw in text.splitlines():
            line = _clean(raw)
            found = _label(line)
            if warning is not None:
                if line and found is None and not line.startswith(("warnings.warn", "return ", "[")):
                    warning.append(line)
                    continue
                self._warning(warning)
                warning = None
            if not line or _SEPARATOR_RE.match(line):
                current = None
                if state == "packages" and self.packages:
                    state = "after"
                continue
            match = _WARNING_RE.search(line)
            if match is not None and found is None:
                warning = [match.group("text")]
                continue
            package = _PACKAGE_RE.match(line)
            if package is not None:
                self.packages.append((package.group("tool").lower(), package.group("rest").strip()))
                state = "packages"
                continue
            if found is not None:
                key, value = found
                if key in self.fields:
                    if key == "torch":
                        self.notes.append(
                            "the text holds a second collect_env report; only the first was read"
                        )
                        break
                    current = None
                    continue
                self.fields[key] = [value] if value else []
                current = key
                state = {"cpu": "cpu", "libraries": "packages"}.get(key, "fields")
                continue
            if state == "packages" and self.packages:
                # A mail client wraps conda's wide columns: the channel or build lands alone below.
                # (pip lines are one token and never wrap; a line after them is chatter.)
                tool, rest = self.packages[-1]
                if tool == "conda" and len(rest.split()) + len(line.split()) <= 4:
                    self.packages[-1] = (tool, f"{rest} {line}")
                else:
                    state = "after"
                continue
            listed = current == "gpus" and (_GPU_RE.match(line) or line.startswith("MIG"))
            if (
                state in ("fields", "cpu")
                and current is not None
                and (listed or not _OTHER_LABEL_RE.match(line))
            ):
                if current != "cpu":
                    self.fields[current].append(line)
                continue
            current = None
        if warning is not None:
            self._warning(warning)

    def _warning(self, lines: list[str]) -> None:
        text = " ".join(part for part in lines if part)
        if text and text not in self.warnings:
            self.warnings.append(text[:500])

    def value(self, key: str) -> Optional[str]:
        """The field's text (wrapped lines joined); None when absent or collect_env had nothing."""
        parts = self.fields.get(key)
        if parts is None:
            return None
        text = " ".join(parts).strip()
        # A wrap may glue chatter onto "Could not collect"; the value is still nothing.
        lowered = text.lower()
        return None if any(lowered == n or lowered.startswith(n + " ") for n in _NOTHING) else text


def _first_version(text: Optional[str]) -> Optional[Version]:
    if text is None:
        return None
    match = re.match(r"^v?(\d+(?:\.\d+)*(?:(?:a|b|rc|\.dev|\.post)\d*)?(?:\+[A-Za-z0-9.]+)?)", text)
    return parse_version(match.group(1)) if match else None


def _driver(text: Optional[str]) -> Optional[NvVersion]:
    match = re.match(r"^(\d+(?:\.\d+){0,3})\b", text or "")
    if match is None:
        return None
    try:
        return NvVersion(match.group(1))
    except ValueError:
        return None


def _yes_no(text: Optional[str]) -> Optional[bool]:
    word = (text or "").split(" ", 1)[0].lower()
    return {"yes": True, "true": True, "no": False, "false": False}.get(word)


def _gpus(lines: list[str], notes: list[str]) -> tuple[GpuFacts, ...]:
    """``GPU 0: NVIDIA H100 80GB HBM3`` lines (``nvidia-smi -L``; MIG devices listed below their GPU),
    or one bare name (old releases, and ROCm builds that print ``torch.cuda.get_device_name``)."""
    from envkit.knowledge import load_knowledge

    indices: list[int] = []
    names: list[str] = []
    migs: list[list[str]] = []  # the MIG devices' profiles below each GPU
    for line in lines:
        if line.lower() in _NOTHING:
            continue
        mig_line = _MIG_RE.match(line)
        if mig_line is not None and migs:
            # nvidia-smi -L: "  MIG 3g.40gb     Device  0: (UUID: MIG-…)" (collect_env drops the UUID).
            migs[-1].append(mig_line.group(1))
            continue
        marks = list(_GPU_RE.finditer(line))
        head = line[: marks[0].start()].strip() if marks else line
        if head:  # a wrapped name goes on; a bare name is the old single-GPU form
            if names:
                names[-1] = f"{names[-1]} {head}"
            else:
                indices.append(0)
                names.append(head)
                migs.append([])
        for i, mark in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
            indices.append(int(mark.group(1)))
            names.append(line[mark.end() : end].strip())
            migs.append([])
    try:
        knowledge = load_knowledge()
    except Exception as exc:  # noqa: BLE001 -- a broken knowledge base must not hide the paste
        notes.append(f"compute capabilities not looked up: {exc}")
        knowledge = None
    gpus = []
    for index, raw_name, mig in zip(indices, names, migs):
        uuid_match = _UUID_RE.search(raw_name)
        name = _UUID_RE.sub("", raw_name).strip() or None
        known = knowledge.gpu_named(name) if knowledge is not None and name else None
        if name and knowledge is not None and known is None:
            notes.append(f"GPU {index} ({name}): envkit's GPU table does not know its compute capability")
        gpus.append(
            GpuFacts(
                index=index,
                name=name,
                uuid=uuid_match.group(1).strip() if uuid_match else None,
                compute_capability=known.cc if known else None,
                mig_enabled=True if mig else None,
                mig_devices=tuple(mig),
                source=SOURCE,
            )
        )
    return tuple(gpus)


def _with_reported_cc(gpus: tuple[GpuFacts, ...], messages: TorchMessages) -> tuple[GpuFacts, ...]:
    """GPUs the GPU table does not know get the compute capability torch read from the device and
    printed in its warning (same name)."""
    reported = {g.name: g.compute_capability for g in messages.incompatible_gpus if g.compute_capability}
    return tuple(
        dataclasses.replace(gpu, compute_capability=reported[gpu.name])
        if gpu.compute_capability is None and gpu.name in reported
        else gpu
        for gpu in gpus
    )


def _platform(reader: _Reader, notes: list[str]) -> tuple[Optional[str], Optional[str], Optional[str]]:
    """(envkit platform like "linux-x86_64", kernel, arch) from "Python platform", else "OS"."""
    plat = reader.value("platform") or ""
    banner = reader.value("python") or ""
    os_line = reader.value("os") or ""
    arch_match = _ARCH_RE.search(plat) or _ARCH_RE.search(os_line)
    arch = arch_match.group(1).lower() if arch_match else None
    # platform.platform(): Linux-<kernel>-<machine>-with-glibc2.35, Windows-10-10.0.22621-SP0,
    # macOS-14.5-arm64-arm-64bit (Darwin-… before Python 3.8).
    system = plat.split("-", 1)[0].lower()
    if not system:
        words = (("windows", "windows"), ("mac", "macos"), ("darwin", "macos"))
        default = "linux" if os_line else ""  # "Ubuntu 18.04.4 LTS", "CentOS Linux 7 (Core)", …
        system = next((name for word, name in words if word in os_line.lower()), default)
    kernel = None
    if system == "linux" and plat:
        kernel = re.sub(r"-(?:x86_64|aarch64|arm64|ppc64le|s390x|i686|armv7l)-.*$", "", plat[len("linux-") :])
    if system == "windows" and arch is None:
        # Windows' platform string names no machine; sys.version does: "[MSC v.1916 64 bit (AMD64)]".
        arch = "arm64" if "ARM64" in banner else "x86" if "32 bit" in banner else "x86_64"
    if system in ("linux", "macos", "darwin") and arch is None:
        arch = "x86_64"
        notes.append(f"the report names no CPU architecture; assumed {system}-x86_64")
    if arch is None or not system:
        return None, kernel, arch
    arch = {"amd64": "x86_64"}.get(arch, arch)
    if system == "linux" and arch == "arm64":
        arch = "aarch64"
    name = {"darwin": "macos"}.get(system, system)
    return f"{name}-{arch}", kernel, arch


def _python(reader: _Reader, platform: Optional[str]) -> Optional[PythonFacts]:
    banner = reader.value("python")
    libc = reader.value("libc")
    glibc = re.match(r"^glibc-(\d+(?:\.\d+)*)", libc or "")
    if glibc is None:
        glibc = re.search(r"-with-glibc(\d+(?:\.\d+)*)", reader.value("platform") or "")
    if banner is None and platform is None and glibc is None:
        return None
    implementation = None
    if banner and "PyPy" in banner:
        implementation = "PyPy"
    elif banner and re.search(r"\[(?:GCC|MSC|Clang)\b", banner):
        implementation = "CPython"
    return PythonFacts(
        # collect_env does not say which interpreter ran it; "python" is what the user typed.
        executable="python",
        selected_by=SOURCE,
        version=_first_version(banner),
        implementation=implementation,
        platform=platform,
        glibc=parse_version(glibc.group(1)) if glibc else None,
    )


def _packages(reader: _Reader, notes: list[str]) -> tuple[tuple[Distribution, ...], tuple[CondaPackage, ...]]:
    pip: dict[str, Distribution] = {}
    conda: list[CondaPackage] = []
    from_conda: list[Distribution] = []
    for tool, rest in reader.packages:
        if rest.lower() in _NOTHING:
            continue
        if tool.startswith("pip"):
            match = _PIP_RE.match(rest)
            if match is None:
                notes.append(f"package line not read: [{tool}] {rest}")
                continue
            version = match.group("v1") or match.group("v2")
            name = match.group("name")
            dist = Distribution(name, parse_version(version) if version else None)
            pip[dist.name] = dist
            continue
        cols = rest.split()
        if len(cols) < 2 or not _NAME_RE.match(cols[0]):
            notes.append(f"package line not read: [conda] {rest}")
            continue
        version = parse_version(cols[1])
        # `conda list` also shows what pip installed (build "pypi_0" channel "pypi", or "<pip>"
        # in old conda): those are distributions, not conda packages.
        if any(c in _CONDA_PIP_CHANNELS for c in cols[2:]):
            from_conda.append(Distribution(cols[0], version))
            continue
        conda.append(
            CondaPackage(
                cols[0], version, cols[2] if len(cols) > 2 else "", cols[3] if len(cols) > 3 else None
            )
        )
    for dist in from_conda:
        pip.setdefault(dist.name, dist)
    return tuple(sorted(pip.values(), key=lambda d: d.name)), tuple(conda)


def _cuda_libs(reader: _Reader, notes: list[str]) -> tuple[SharedLib, ...]:
    """cuDNN files collect_env found with ``ldconfig -p`` (Linux): they are in the ld.so cache."""
    libs = []
    for token in " ".join(reader.fields.get("cudnn", [])).split():
        name = token.rsplit("/", 1)[-1]
        family = lib_family(name) if token.startswith("/") else None
        if family is not None:
            libs.append(SharedLib(token, family[0], parse_version(family[1] or ""), "ld.so.cache"))
    if (
        not libs
        and reader.value("cudnn")
        and not (reader.value("cudnn") or "").lower().startswith("probably")
    ):
        notes.append(f"cuDNN (not recorded): {reader.value('cudnn')}")
    return tuple(libs)


def _torch(reader: _Reader, notes: list[str], messages: TorchMessages) -> TorchFacts:
    dists, conda = _packages(reader, notes)
    raw_version = " ".join(reader.fields.get("torch", [])).strip()
    version = _first_version(reader.value("torch"))
    error = None
    if raw_version.upper().startswith("N/A"):
        # collect_env prints N/A when `import torch` failed in the interpreter that ran it.
        error = "collect_env could not import torch (PyTorch version: N/A)"
    cuda = _first_version(reader.value("cuda_built"))
    hip = reader.value("rocm_built")
    if version is None and not raw_version:
        # A paste cut down to its package lines ("[pip3] torch==2.10.0.dev20250901+rocm7.0") still
        # names the build: its version, and its CUDA or ROCm from the wheel's local version where
        # the "used to build" lines are not in the text at all (their "None" is an answer).
        pip_torch = next((d for d in dists if d.name == "torch"), None)
        if pip_torch is not None and pip_torch.version is not None:
            version = pip_torch.version
            local = version.local or ""
            cuda_cut, rocm_cut = "cuda_built" not in reader.fields, "rocm_built" not in reader.fields
            if cuda_cut and cuda is None:
                cuda = variant_cuda(local)
            if rocm_cut and not hip and local.startswith("rocm"):
                hip = local[4:]
            notes.append(f"torch {version} read from the package lines (the paste has no 'PyTorch version')")
    available = _yes_no(reader.value("cuda_available"))
    # "Is XPU available: True|False" is str(torch.xpu.is_available()) (torch 2.5+; on True the
    # driver and GPU lines follow it), pytorch/pytorch:torch/utils/collect_env.py get_env_info.
    xpu = _yes_no(reader.value("xpu"))
    deep = None
    if available is not None or xpu is not None:
        # collect_env imported torch in the reporting interpreter and asked it, as --deep does
        # (it prints "N/A" where the import failed, so True/False means torch imported).
        deep = DeepTorchFacts(
            ok=True,
            version=version or messages.torch_version,
            cuda_available=available,
            xpu_available=xpu,
            warnings=tuple(reader.warnings),
        )
    torch = with_messages(
        TorchFacts(
            version=version,
            cuda=cuda,
            hip=hip.split(" ", 1)[0] if hip else None,
            distributions=dists,
            conda_packages=conda,
            error=error,
            deep=deep,
        ),
        messages,
    )
    if messages.cuda_init_message:
        notes.append(f"torch said: {messages.cuda_init_message}")
    if version is None and messages.torch_version is not None:
        notes.append(f"torch version {messages.torch_version} read from torch's warning")
    return torch


def _gpus_from_messages(messages: TorchMessages, notes: list[str]) -> tuple[GpuFacts, ...]:
    """The GPUs torch's warnings name, for a paste whose GPU list is missing: torch read their
    compute capability from the device itself."""
    gpus = []
    for n, gpu in enumerate(messages.incompatible_gpus):
        if gpu.compute_capability is None:
            continue
        index = gpu.index if gpu.index is not None else n
        gpus.append(
            GpuFacts(
                index=index, name=gpu.name, compute_capability=gpu.compute_capability, source="torch warning"
            )
        )
    if gpus:
        notes.append(
            "GPUs read from torch's warnings (the paste lists none; the driver's GPU list is unknown): "
            + ", ".join(f"GPU {g.index} ({g.name}, {g.compute_capability})" for g in gpus)
        )
    return tuple(gpus)


def parse_collect_env(text: str) -> Facts:
    """The Facts a collect_env report shows; fields it lacks stay None and are named in notes.

    Never raises: text that is not a report gives empty Facts with a note saying so.
    """
    try:
        return _what_a_paste_lacks(_parse(text), text)
    except Exception as exc:  # noqa: BLE001 -- pasted text must never crash doctor; say what happened
        return Facts(notes=(f"collect_env text could not be read: {type(exc).__name__}: {exc}",))


# The dynamic loader's and torch's words when a CUDA library of another version was loaded:
# "undefined symbol: ncclCommResume" (pytorch/pytorch#186591), "libcusparse.so.12: undefined symbol:
# __nvJitLinkAddData_12_1, version libnvJitLink.so.12" (pytorch/pytorch#111469), "Could not load
# library libcudnn_cnn_train.so.8" (pytorch/pytorch#119989), torch's "cuDNN version incompatibility:
# PyTorch was compiled against (8, 3, 2) but found runtime version (8, 0, 3)" (pytorch/pytorch#80637),
# glibc's "version `GLIBCXX_3.4.30' not found" and "cannot open shared object file".
_LOADER_ERROR_RE: Final = re.compile(
    r"undefined symbol|nvJitLink|cuDNN version incompatibility|Could not load library lib\w+\.so"
    r"|version `[^']+' not found|cannot open shared object file|with link time reference",
    re.IGNORECASE,
)


def _what_a_paste_lacks(facts: Facts, text: str) -> Facts:
    """Two things a report leaves unsaid: collect_env prints no environment variables (LD_LIBRARY_PATH
    is unknown, not empty), and the loader's error a reporter pastes above or below it is the failed
    import's cause."""
    host = dataclasses.replace(facts.host, unanswered=(*facts.host.unanswered, "env"))
    torch = facts.torch
    loader = next(
        (line.strip()[:300] for line in map(_clean, text.splitlines()) if _LOADER_ERROR_RE.search(line)),
        None,
    )
    if loader is not None:
        torch = dataclasses.replace(torch, error=f"{torch.error}: {loader}" if torch.error else loader)
    return dataclasses.replace(facts, host=host, torch=torch)


def _parse(text: str) -> Facts:
    if not looks_like_collect_env(text):
        return Facts(notes=("the text is not `python -m torch.utils.collect_env` output",))
    reader = _Reader()
    reader.read(text)
    notes = list(reader.notes)
    messages = read_torch_messages(_clean(line) for line in text.splitlines())
    platform, kernel, arch = _platform(reader, notes)
    driver = _driver(reader.value("driver"))
    gpus: tuple[GpuFacts, ...] = ()
    amd = VendorFacts("amd")
    if reader.value("rocm_built"):
        # A ROCm build prints torch.cuda.get_device_name() and its gcnArchName: an AMD GPU.
        amd = _amd_gpus(reader.fields.get("gpus", []), notes)
    else:
        gpus = _gpus(reader.fields.get("gpus", []), notes) or _gpus_from_messages(messages, notes)
        gpus = _with_reported_cc(gpus, messages)
    nvcc = _first_version(reader.value("nvcc"))
    env = {}
    loading = reader.value("module_loading")
    if loading:
        env["CUDA_MODULE_LOADING"] = loading.split(" ", 1)[0]
    host = HostFacts(
        os=reader.value("os"),
        kernel=kernel,
        arch=arch,
        wsl="microsoft" in (kernel or "").lower(),
        env=env,
        cuda_libs=_cuda_libs(reader, notes),
    )
    labels = {key: label.replace("s?", "s") for key, label in _LABELS}
    missing = [
        labels[key]
        for key in _EXPECTED
        if key not in reader.fields and not (key == "libraries" and reader.packages)
    ]
    if missing:
        notes.append("not in the pasted text (cut short?): " + ", ".join(missing))
    uncollected = [
        labels[key]
        for key in _EXPECTED
        if " ".join(reader.fields.get(key, [])).lower().startswith("could not collect")
    ]
    if uncollected:
        notes.append("collect_env could not collect: " + ", ".join(uncollected))
    return Facts(
        unknown=_unknown(reader, gpus),
        host=host,
        driver=DriverFacts(version=driver, source=SOURCE if driver else None),
        gpus=gpus,
        toolkits=(
            # "CUDA runtime version" is `nvcc --version` run through the shell: the nvcc on PATH.
            (ToolkitFacts(nvcc="nvcc", version=nvcc, sources=(SOURCE,), on_path=True),) if nvcc else ()
        ),
        python=_python(reader, platform),
        torch=_torch(reader, notes, messages),
        amd=amd,
        notes=(f"read from pasted `python -m torch.utils.collect_env` output ({SOURCE})", *notes),
    )


# Facts fields a label carries: when the label is not in the paste (cut short), they are unknown.
_CARRIES: Final = {
    "torch": ("torch.version",),
    "cuda_built": ("torch.cuda",),
    "python": ("python.version",),
    "cuda_available": ("torch.deep",),
    "nvcc": ("toolkits",),
    "gpus": ("gpus",),
    "driver": ("driver.version",),
    "cudnn": ("host.cuda_libs",),
    "libraries": ("torch.distributions", "torch.conda_packages"),
}


def _uncollected(reader: _Reader, key: str) -> bool:
    return " ".join(reader.fields.get(key, [])).lower().startswith("could not collect")


# "AMD Instinct MI210 (gfx90a:sramecc+:xnack-)": collect_env's line for a ROCm build
# (torch.cuda.get_device_name() and the device's gcnArchName, torch/utils/collect_env.py get_gpu_info).
_AMD_GPU_RE: Final = re.compile(r"^(?:GPU \d+:\s*)?(?P<name>.+?)\s*\((?P<gfx>gfx[0-9a-fA-F]+)[^)]*\)\s*$")


def _amd_gpus(lines: list[str], notes: list[str]) -> VendorFacts:
    """The AMD GPU a ROCm build's report names, with its gfx target; the driver is not in a report."""
    gpus: list[AccelGpu] = []
    for line in lines:
        m = _AMD_GPU_RE.match(_clean(line).strip())
        if m:
            gfx = normalize_gfx(m.group("gfx"))
            gpus.append(AccelGpu(index=len(gpus), name=m.group("name"), arch=gfx, source=SOURCE))
    if not gpus and any(line.strip() for line in lines):
        notes.append(f"ROCm build; GPU without a gfx target not recorded: {' '.join(lines).strip()}")
    return VendorFacts("amd", gpus=tuple(gpus), sources=(SOURCE,) if gpus else ())


def _unknown(reader: _Reader, gpus: tuple[GpuFacts, ...]) -> tuple[str, ...]:
    """The Facts fields the paste does not report: their labels are missing (every release prints
    them), or pip's list says "Could not collect" (pip did not answer, which says nothing)."""
    unknown: list[str] = []
    for key, paths in _CARRIES.items():
        if key == "libraries":
            # "[pip3] No relevant packages" is an answer; "[pip3] Could not collect" is none.
            answered = [rest for _tool, rest in reader.packages if rest.lower() != "could not collect"]
            if answered:
                continue
        elif key in ("torch", "python") and _uncollected(reader, key):
            pass  # collect_env could not read it: unknown (a driver or GPU it could not read is a finding)
        elif key in reader.fields or (key == "gpus" and gpus):
            continue  # (GPUs read from torch's warnings stand in for a missing list)
        unknown.extend(paths)
    return tuple(unknown)


# The fields every release printed; a paste without one was cut short (or edited).
_EXPECTED: Final = (
    "torch",
    "cuda_built",
    "os",
    "python",
    "cuda_available",
    "nvcc",
    "gpus",
    "driver",
    "libraries",
)
# Checks whose facts collect_env does not report (/dev/shm, GPU health counters, NCCL variables):
# on facts read from a paste their verdicts say nothing, so doctor --from leaves them out.
UNREPORTED_CHECKS: Final = ("python.shm", "gpu.health", "nccl.env")
