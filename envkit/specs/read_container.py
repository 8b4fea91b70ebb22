"""Reading the container files people have, for ``envkit spec --check``: Dockerfiles, Apptainer
definition files, Compose files and Kubernetes manifests (Pod, Job, Deployment, anything with a pod
template). Only what envkit.specs.check_container judges is kept: the base images, the ``pip
install`` lines (with the requirements files they install, where the file copies them from beside
it), and for Compose services and Kubernetes containers how they ask for GPUs and for /dev/shm.

The kind comes from the file's name (``Dockerfile``, ``*.def``, ``compose.yaml``) and else from its
content (a first ``FROM``/``ARG`` instruction, ``Bootstrap:``, a ``services`` map, ``apiVersion`` +
``kind``). YAML goes through envkit._files.parse_yaml (no aliases, the input size cap).
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final, Optional

from envkit._files import parse_yaml, read_text
from envkit.errors import InputError
from envkit.specs.read import SpecFile, _pip_lines, read_spec

__all__ = [
    "CONTAINER_KINDS",
    "ContainerFile",
    "ImageUse",
    "PipInstall",
    "Workload",
    "container_kind",
    "read_container",
]

CONTAINER_KINDS: Final = ("dockerfile", "apptainer", "compose", "kubernetes")
_COMPOSE_NAME_RE: Final = re.compile(r"^(docker-)?compose(\.[\w.-]+)?\.ya?ml$")
_DOC_SPLIT_RE: Final = re.compile(r"^---[ \t]*(?:#.*)?$", re.MULTILINE)
_VAR_RE: Final = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
# pip options that take a value (pip install --help); the others are flags.
_PIP_VALUE_OPTIONS: Final = frozenset(
    {"-t", "--target", "--prefix", "--root", "--platform", "--python-version", "--implementation",
     "--abi", "--src", "--upgrade-strategy", "--only-binary", "--no-binary", "--progress-bar",
     "--cache-dir", "--log", "--timeout", "--retries", "--trusted-host", "--proxy", "--cert",
     "--client-cert", "--config-settings", "-C", "--global-option", "-e", "--editable", "--python"}
)  # fmt: skip
_PIP_INDEX_OPTIONS: Final = frozenset(
    {
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "-r",
        "--requirement",
        "-c",
        "--constraint",
    }
)


@dataclass(frozen=True)
class ImageUse:
    ref: str  # as written, ARG defaults substituted
    where: str  # "line 3", "service app", "Deployment/ollama container ollama"


@dataclass(frozen=True)
class PipInstall:
    where: str
    text: str  # the command as written
    spec: SpecFile  # its requirements and index options, read as a requirements file's
    requirements: tuple[str, ...] = ()  # the -r files, as the build sees them
    followed: Optional[SpecFile] = None  # the -r file read from beside the container file


@dataclass(frozen=True)
class Workload:
    """A Compose service or a Kubernetes container: how it asks for GPUs and /dev/shm."""

    where: str
    image: Optional[str]
    gpu: bool  # a GPU device reservation / nvidia.com/gpu limit
    gpu_legacy: bool = False  # compose ``runtime: nvidia`` only
    gpu_request_only: bool = False  # k8s: nvidia.com/gpu in requests, not limits
    shm: bool = False  # shm_size / ipc: host; k8s: a Memory emptyDir on /dev/shm or hostIPC
    runtime_class: Optional[str] = None  # k8s runtimeClassName


@dataclass(frozen=True)
class ContainerFile:
    path: str
    kind: str  # one of CONTAINER_KINDS
    images: tuple[ImageUse, ...] = ()
    pips: tuple[PipInstall, ...] = ()
    workloads: tuple[Workload, ...] = ()
    notes: tuple[str, ...] = ()


def _yaml_docs(text: str, label: str) -> list[Any]:
    """Each ``---`` document of a YAML stream (Kubernetes files hold several)."""
    return [d for d in (parse_yaml(part, label) for part in _DOC_SPLIT_RE.split(text)) if d is not None]


def _first_instruction(text: str) -> str:
    for line in text.splitlines():
        bare = line.strip()
        if bare and not bare.startswith("#"):
            return bare
    return ""


def container_kind(path: Path, text: str) -> Optional[str]:
    """Which container file ``path`` is (CONTAINER_KINDS), or None: not one envkit reads."""
    name = path.name.lower()
    first = _first_instruction(text)
    if (
        name in ("dockerfile", "containerfile")
        or name.startswith("dockerfile.")
        or name.endswith(".dockerfile")
    ):
        return "dockerfile"
    if first.lower().startswith("bootstrap:"):
        return "apptainer"
    if path.suffix.lower() in (".yml", ".yaml"):
        if _COMPOSE_NAME_RE.match(name):
            return "compose"
        try:
            docs = _yaml_docs(text, str(path))
        except InputError:
            return None  # read_spec says what is wrong with it
        if any(isinstance(d, dict) and "apiVersion" in d and "kind" in d for d in docs):
            return "kubernetes"
        if docs and isinstance(docs[0], dict) and isinstance(docs[0].get("services"), dict):
            return "compose" if "dependencies" not in docs[0] else None
        return None
    if re.match(r"^(FROM|ARG)\s", first, re.IGNORECASE):
        return "dockerfile"
    return None


# --- pip lines --------------------------------------------------------------------------------------


def _commands(shell: str) -> list[list[str]]:
    """A shell line split into commands (``&&``, ``||``, ``;``, ``|``) of words; None-safe on quotes."""
    try:
        lexer = shlex.shlex(shell, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:  # an unclosed quote
        words = shell.split()
    commands: list[list[str]] = [[]]
    for word in words:
        if word and set(word) <= set(";&|"):
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def _pip_args(words: list[str]) -> Optional[list[str]]:
    """The arguments after ``install`` of a pip command (pip, pip3, python -m pip, uv pip), else None."""
    for i, word in enumerate(words):
        base = PurePosixPath(word).name
        if (
            re.match(r"^pip(3(\.\d+)?)?$", base)
            or (base == "pip" and i >= 2 and words[i - 1] == "-m")
            or (base == "pip" and i >= 1 and PurePosixPath(words[i - 1]).name == "uv")
        ):
            rest = words[i + 1 :]
            while rest and rest[0].startswith("-") and rest[0] != "install":  # pip --no-cache-dir install
                rest = rest[1:]
            return rest[1:] if rest and rest[0] == "install" else None
    return None


def _pip_install(args: list[str], where: str, text: str) -> PipInstall:
    """pip's install arguments as the lines of a requirements file (envkit.specs.read reads them)."""
    lines: list[str] = []
    requirements: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        flag, eq, value = arg.partition("=")
        if arg.startswith("-") and (flag in _PIP_INDEX_OPTIONS or flag in _PIP_VALUE_OPTIONS):
            if not eq:
                value = args[i + 1] if i + 1 < len(args) else ""
                i += 1
            if flag in ("-r", "--requirement"):
                requirements.append(value)
            elif flag in _PIP_INDEX_OPTIONS:
                lines.append(f"{flag} {value}")
        elif not arg.startswith("-") and not arg.startswith("$"):
            lines.append(arg)
        i += 1
    spec = SpecFile(where, "pip", **_pip_lines(lines))
    return PipInstall(where, text, spec, tuple(requirements))


def _follow(pip: PipInstall, copies: dict[str, str], base: Path) -> PipInstall:
    """The -r file read from beside the container file, where a COPY / %files line put it there."""
    for wanted in pip.requirements:
        source = copies.get(wanted) or copies.get(str(PurePosixPath(wanted).parent) + "/")
        if source is None:
            continue
        local = base / (source if not source.endswith("/") else source + PurePosixPath(wanted).name)
        if local.is_file():
            try:
                return PipInstall(pip.where, pip.text, pip.spec, pip.requirements, read_spec(local))
            except InputError:
                return pip
    return pip


def _shell_pips(line: str, where: str) -> list[PipInstall]:
    found = []
    for words in _commands(line):
        args = _pip_args(words)
        if args is not None:
            found.append(_pip_install(args, where, " ".join(words)))
    return found


# --- Dockerfile and Apptainer -------------------------------------------------------------------------


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, instruction) with ``\\`` continuations joined and comments dropped."""
    out: list[tuple[int, str]] = []
    start, parts = 0, list[str]()
    for number, raw in enumerate(text.splitlines(), 1):
        bare = raw.strip()
        if not parts and (not bare or bare.startswith("#")):
            continue
        if parts and bare.startswith("#"):
            continue  # a comment inside a continued instruction
        if not parts:
            start = number
        if bare.endswith("\\"):
            parts.append(bare[:-1])
            continue
        parts.append(bare)
        out.append((start, " ".join(parts)))
        parts = []
    if parts:
        out.append((start, " ".join(parts)))
    return out


def _substitute(text: str, args: dict[str, str]) -> str:
    return _VAR_RE.sub(lambda m: args.get(m.group(1), m.group(0)), text)


def _dockerfile(text: str, path: Path) -> ContainerFile:
    args: dict[str, str] = {}
    stages: set[str] = set()
    images: list[ImageUse] = []
    pips: list[PipInstall] = []
    copies: dict[str, str] = {}
    notes: list[str] = []
    for number, line in _logical_lines(text):
        word, _, rest = line.partition(" ")
        instruction, rest = word.upper(), rest.strip()
        if instruction == "ARG":
            for item in rest.split():
                name, eq, value = item.partition("=")
                if eq:
                    args[name] = value.strip("\"'")
        elif instruction == "FROM":
            words = [w for w in rest.split() if not w.startswith("--")]
            if not words:
                continue
            ref = _substitute(words[0], args)
            if len(words) >= 3 and words[1].lower() == "as":
                stages.add(words[2].lower())
            if ref.lower() in stages or ref == "scratch":
                continue
            if "$" in ref:
                notes.append(f"line {number}: FROM {words[0]}: a build argument without a default")
                continue
            images.append(ImageUse(ref, f"line {number}"))
        elif instruction in ("COPY", "ADD"):
            words = [w for w in rest.split() if not w.startswith("--")]
            if len(words) >= 2:
                for source in words[:-1]:
                    dest = words[-1]
                    target = dest + PurePosixPath(source).name if dest.endswith("/") else dest
                    copies[target] = source
        elif instruction == "RUN":
            body = rest
            while body.startswith("--"):  # RUN --mount=... --network=...
                body = body.split(" ", 1)[1] if " " in body else ""
            if body.startswith("["):
                with contextlib.suppress(ValueError):  # not JSON: the shell form after all
                    body = " ".join(str(w) for w in json.loads(body))
            pips += _shell_pips(_substitute(body, args), f"line {number}")
    pips = [_follow(p, copies, path.parent) for p in pips]
    return ContainerFile(str(path), "dockerfile", tuple(images), tuple(pips), (), tuple(notes))


def _apptainer(text: str, path: Path) -> ContainerFile:
    header: dict[str, str] = {}
    section = ""
    images: list[ImageUse] = []
    pips: list[PipInstall] = []
    copies: dict[str, str] = {}
    for number, line in _logical_lines(text):
        if line.startswith("%"):
            section = line.split()[0].lower()
            continue
        if not section:
            key, _, value = line.partition(":")
            header[key.strip().lower()] = value.strip()
            if key.strip().lower() == "from" and header.get("bootstrap", "").lower() in (
                "docker",
                "docker-daemon",
            ):
                images.append(ImageUse(value.strip(), f"line {number}"))
        elif section == "%files":
            words = line.split()
            if len(words) == 2:
                copies[words[1]] = words[0]
        elif section == "%post":
            pips += _shell_pips(line, f"line {number}")
    pips = [_follow(p, copies, path.parent) for p in pips]
    return ContainerFile(str(path), "apptainer", tuple(images), tuple(pips))


# --- Compose and Kubernetes --------------------------------------------------------------------------


def _has_gpu_capability(devices: Any) -> bool:
    return isinstance(devices, list) and any(
        isinstance(d, dict) and isinstance(d.get("capabilities"), list) and "gpu" in d["capabilities"]
        for d in devices
    )


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _compose(text: str, path: Path) -> ContainerFile:
    docs = _yaml_docs(text, str(path))
    data = docs[0] if docs else None
    services = data.get("services") if isinstance(data, dict) else None
    if not isinstance(services, dict):
        raise InputError(f"{path}: not a Compose file (no 'services' map)")
    images, workloads, notes = [], [], []
    for name, service in services.items():
        if not isinstance(service, dict):
            notes.append(f"service {name}: not a map")
            continue
        where = f"service {name}"
        image = service.get("image") if isinstance(service.get("image"), str) else None
        if image and "build" not in service:
            images.append(ImageUse(image, where))
        elif "build" in service:
            notes.append(f"{where}: built from its Dockerfile (check that file with spec --check too)")
        devices = _dig(service, "deploy", "resources", "reservations", "devices")
        gpus = service.get("gpus")  # the Compose Specification's short form: gpus: all
        gpu = _has_gpu_capability(devices) or gpus == "all" or isinstance(gpus, list)
        shm = service.get("shm_size") is not None or service.get("ipc") == "host"
        legacy = service.get("runtime") == "nvidia" and not gpu
        workloads.append(Workload(where, image, gpu, gpu_legacy=legacy, shm=shm))
    return ContainerFile(str(path), "compose", tuple(images), (), tuple(workloads), tuple(notes))


def _pod_specs(data: Any, found: list[dict[str, Any]]) -> None:
    """Every pod spec (a map with a ``containers`` list) under ``data``: Pod, Job, Deployment,
    CronJob, and operators' replica specs (PyTorchJob) alike."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("containers"), list):
                found.append(item)
                continue
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _gpu_count(resources: Any, part: str) -> bool:
    value = _dig(resources, part, "nvidia.com/gpu")
    try:
        return value is not None and float(str(value)) > 0
    except ValueError:
        return False


def _kubernetes(text: str, path: Path) -> ContainerFile:
    images, workloads = [], []
    for doc in _yaml_docs(text, str(path)):
        if not isinstance(doc, dict):
            continue
        label = f"{doc.get('kind', '?')}/{_dig(doc, 'metadata', 'name') or '?'}"
        pods: list[dict[str, Any]] = []
        _pod_specs(doc.get("spec"), pods)
        for pod in pods:
            memory = {
                v.get("name")
                for v in pod.get("volumes") or []
                if isinstance(v, dict) and _dig(v, "emptyDir", "medium") == "Memory"
            }
            runtime = pod.get("runtimeClassName") if isinstance(pod.get("runtimeClassName"), str) else None
            for c in pod["containers"]:
                if not isinstance(c, dict):
                    continue
                where = f"{label} container {c.get('name', '?')}"
                image = c.get("image") if isinstance(c.get("image"), str) else None
                if image:
                    images.append(ImageUse(image, where))
                limit, request = (
                    _gpu_count(c.get("resources"), "limits"),
                    _gpu_count(c.get("resources"), "requests"),
                )
                shm = pod.get("hostIPC") is True or any(
                    isinstance(m, dict) and m.get("mountPath") == "/dev/shm" and m.get("name") in memory
                    for m in c.get("volumeMounts") or []
                )
                workloads.append(
                    Workload(
                        where,
                        image,
                        limit,
                        gpu_request_only=request and not limit,
                        shm=shm,
                        runtime_class=runtime,
                    )
                )
    return ContainerFile(str(path), "kubernetes", tuple(images), (), tuple(workloads))


def read_container(path: Path, text: Optional[str] = None) -> ContainerFile:
    """Read ``path`` as the container file container_kind says it is; InputError when it is none."""
    text = read_text(str(path)) if text is None else text
    kind = container_kind(path, text)
    if kind == "dockerfile":
        return _dockerfile(text, path)
    if kind == "apptainer":
        return _apptainer(text, path)
    if kind == "compose":
        return _compose(text, path)
    if kind == "kubernetes":
        return _kubernetes(text, path)
    raise InputError(f"{path}: not a Dockerfile, Apptainer definition, Compose file or Kubernetes manifest")
