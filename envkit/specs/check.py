"""``envkit spec --check FILE``: an ``environment.yml`` or ``requirements.txt`` someone already has,
checked against the knowledge base and the target machine. Each finding has its fix, made by the
resolver for the target where a build is the cure.

One result per check, in this order: ``spec.cudatoolkit`` (the conda CUDA packages exist and select
the build), ``spec.channel`` (the channel or index publishes that torch build), ``spec.companions``
(torch, torchvision and torchaudio belong together), ``spec.driver`` (the target driver runs the
build), ``spec.arch`` (the build has code for the target GPUs), ``spec.mirror`` (the indexes and
mirrors serve what is asked of them), ``spec.system_requirements`` (a pixi.toml's
``[system-requirements] cuda`` lets pixi pick the CUDA build, and the target driver meets it).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Final, Optional, Union

from envkit.knowledge import variant_cuda
from envkit.knowledge.mirrors import Layout, MirrorKind
from envkit.mirrors.choose import Mirror, load_mirrors, redact
from envkit.mirrors.http import split_credentials
from envkit.report import CheckResult, Status
from envkit.resolve import rules
from envkit.specs.intent import admits, intent_of, variant_of_url, version_of
from envkit.specs.read import read_spec
from envkit.versions import Version

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

    from envkit.knowledge import Knowledge, Release
    from envkit.resolve.target import Target
    from envkit.specs.intent import SpecIntent
    from envkit.specs.read import Pin, SpecFile

__all__ = ["CHECK_IDS", "check_spec", "check_specfile"]

CHECK_IDS: Final = (
    "spec.cudatoolkit",
    "spec.channel",
    "spec.companions",
    "spec.driver",
    "spec.arch",
    "spec.mirror",
    "spec.system_requirements",
)
_ORDER: Final = (Status.FAIL, Status.WARN, Status.PASS, Status.SKIP)
Finding = tuple[Status, str, str, str]  # status, summary, detail (why, with the source), fix


def _result(check_id: str, found: list[Finding], ok: str, *, skip: str = "") -> CheckResult:
    """The worst finding leads; every detail and fix is kept. No finding: pass (or skip, why)."""
    if not found:
        return CheckResult(check_id, Status.SKIP if skip else Status.PASS, skip or ok)
    found.sort(key=lambda f: _ORDER.index(f[0]))
    status, summary = found[0][0], found[0][1]
    if len(found) > 1:
        summary += f" (and {len(found) - 1} more)"
    detail = "\n".join(f[2] for f in found if f[2])
    fix = "\n".join(dict.fromkeys(f[3] for f in found if f[3]))
    return CheckResult(check_id, status, redact(summary), redact(detail), redact(fix))


def _versions(versions: tuple[Version, ...]) -> str:
    return ", ".join(map(str, versions))


def _toolkit_fix(it: SpecIntent, pin: Pin, wanted: Optional[Version], published: list[Release]) -> str:
    if published:
        options = published[0].conda_pytorch_cuda
        driver = it.target.checked_driver
        runs = [v for v in options if driver is None or rules.driver_floor(it.k, v, driver).runs]
        fitting = [v for v in runs if wanted is None or v <= wanted] or runs or list(options)
        pick = wanted if wanted in runs else max(fitting)
        return (
            f"replace `{pin.text}` with `pytorch-cuda={pick}` (torch {published[0].torch} on -c pytorch "
            f"-c nvidia comes with pytorch-cuda {_versions(options)})"
        )
    if it.channel == "conda-forge":
        return f"replace `{pin.text}` with `cuda-version={wanted or 12}` (conda-forge)"
    return (
        f"replace `{pin.text}`: `pytorch-cuda=X.Y` with -c pytorch -c nvidia for torch ≤ "
        f"{it.k.conda.pytorch_last_release}, or `cuda-version=X.Y` with conda-forge's pytorch"
    )


def _cuda_packages(it: SpecIntent) -> CheckResult:
    if it.spec.kind == "pip":
        return _result("spec.cudatoolkit", [], "", skip="a requirements file names no conda CUDA package")
    conda, k, found = it.spec.conda, it.k, []
    published = it.on_pytorch_channel() if it.channel == "pytorch" else []
    toolkit, pytorch_cuda = conda.get("cudatoolkit"), conda.get("pytorch-cuda")
    if toolkit is not None and toolkit.spec is not None:
        wanted = version_of(toolkit)
        if not any(admits(toolkit.spec, v) for v in k.conda.cudatoolkit_versions):
            why = (
                "CUDA 12 builds come as pytorch-cuda=12.x on -c pytorch -c nvidia (torch ≤ "
                f"{k.conda.pytorch_last_release}) or cuda-version=12.x on conda-forge; there is no "
                "cudatoolkit 12 (conda-forge/conda-forge.github.io#1963)."
            )
            summary = (
                f"{toolkit.text}: no such package; cudatoolkit stops at {max(k.conda.cudatoolkit_versions)}"
            )
            found.append((Status.FAIL, summary, why, _toolkit_fix(it, toolkit, wanted, published)))
        elif published and published[0].torch >= Version("1.13"):
            why = (
                "Since torch 1.13 the pytorch channel's builds depend on pytorch-cuda, not cudatoolkit "
                "(pytorch.org previous-versions: 1.12 was the last 'cudatoolkit=11.x -c pytorch')."
            )
            summary = f"{toolkit.text} does not choose the CUDA build of torch {published[0].torch}"
            found.append((Status.WARN, summary, why, _toolkit_fix(it, toolkit, wanted, published)))
    if pytorch_cuda is not None and pytorch_cuda.spec is not None:
        exists = k.conda.pytorch_cuda_versions
        offered = tuple(sorted({v for r in published for v in r.conda_pytorch_cuda}))
        if not any(admits(pytorch_cuda.spec, v) for v in exists):
            summary = f"{pytorch_cuda.text}: no such version (pytorch-cuda has {_versions(exists)})"
            fix = f"use pytorch-cuda={max(offered or exists)}"
            why = "https://anaconda.org/pytorch/pytorch-cuda lists its versions."
            found.append((Status.FAIL, summary, why, fix))
        elif offered and not any(admits(pytorch_cuda.spec, v) for v in offered):
            torch = published[0].torch
            summary = f"{pytorch_cuda.text}: torch {torch} comes with pytorch-cuda {_versions(offered)}"
            found.append((Status.FAIL, summary, "", f"use pytorch-cuda={max(offered)}"))
    return _result("spec.cudatoolkit", found, "the conda CUDA packages exist and select the build")


def _unknown_release(it: SpecIntent, pin: Pin) -> Finding:
    assert pin.spec is not None
    newest = it.k.releases[0].torch
    lower = [Version(s.version.rstrip("*").rstrip(".")) for s in pin.spec if s.operator in ("==", ">", ">=")]
    beyond = bool(lower) and all(v > newest for v in lower)
    plan = it.plan()
    return (
        Status.WARN if beyond else Status.FAIL,
        f"{pin.text}: no torch release envkit knows matches it (the newest it knows: {newest})",
        "It is newer than envkit's knowledge base: update envkit." if beyond else "",
        f"pin torch {plan.torch}, the newest that fits the target" if plan else "",
    )


def _channel(it: SpecIntent) -> CheckResult:
    pin, found = it.torch, []
    if pin is None or pin.spec is None:
        why = "the file names no torch package" if pin is None else f"{pin.text}: a range envkit cannot read"
        return _result("spec.channel", [], "", skip=why)
    if not it.releases:
        found.append(_unknown_release(it, pin))
    elif it.via == "conda" and it.channel == "pytorch" and not it.on_pytorch_channel():
        last = it.k.conda.pytorch_last_release
        fixes = [f"pin pytorch={last}, the channel's last release"]
        forge = it.plan(torch=pin.spec)
        if forge is not None and forge.conda is not None:
            deps, channels = " ".join(forge.conda.dependencies), " -c ".join(forge.conda.channels)
            fixes.insert(0, f"conda-forge: {deps} -c {channels}")
        pip = dataclasses.replace(it, via="pip").plan(torch=pin.spec)  # pip-in-conda
        if pip is not None:
            fixes.append(f"or torch through pip in the environment (--pip-in-conda): {pip.pip_command()}")
        why = (
            "pytorch/pytorch#138506: 2.5 was the last release published to the pytorch channel; newer "
            "builds are conda-forge's pytorch with cuda-version (https://conda-forge.org/docs/user/cuda/)."
        )
        summary = f"{pin.text}: the pytorch channel never published it (its last torch is {last})"
        found.append((Status.FAIL, summary, why, "; ".join(fixes)))
    elif it.via == "conda" and it.channel == "conda-forge" and "pytorch-cuda" in it.spec.conda:
        line = it.spec.conda["pytorch-cuda"]
        why = "conda-forge's pytorch must not be mixed with pytorch-cuda (rusty1s/pytorch_sparse#391)."
        fix = f"replace `{line.text}` with `cuda-version={version_of(line) or 12}`"
        found.append(
            (Status.WARN, "pytorch-cuda with conda-forge's pytorch, which does not use it", why, fix)
        )
    elif (
        it.via == "pip" and it.variant and not any(r.has(it.target.platform, it.variant) for r in it.releases)
    ):
        r, plan = it.releases[0], it.plan(torch=pin.spec)
        have = ", ".join(r.variants.get(it.target.platform, ())) or "none"
        summary = f"{pin.text}: torch {r.torch} has no {it.variant} build for {it.target.platform}"
        fix = f"use {plan.pip_command()}" if plan else ""
        found.append((Status.FAIL, summary, f"It has {have} (download.pytorch.org/whl).", fix))
    newest = it.releases[0].torch if it.releases else None
    where = f"the {it.channel} channel" if it.channel else "its index"
    return _result("spec.channel", found, f"torch {newest} is published on {where}")


def _same_minor(spec: SpecifierSet, version: Version) -> bool:
    return any(spec.contains(Version(f"{version.major}.{version.minor}.{p}")) for p in range(10))


def _companions(it: SpecIntent) -> CheckResult:
    pin, found = it.torch, []
    if pin is None or pin.spec is None or not it.releases:
        return _result("spec.companions", [], "", skip="no torch release to pair them with")
    lines = it.spec.pip if it.via == "pip" else it.spec.conda
    eq = "==" if it.via == "pip" else "="
    for name in ("torchvision", "torchaudio"):
        comp = lines.get(name)
        if comp is None or comp.spec is None or not len(comp.spec):
            continue
        pairs = [(r.torch, getattr(r, name)) for r in it.releases]
        torch_v, expected = pairs[0]
        if comp.local and pin.local and comp.local != pin.local:
            summary = f"{comp.text} is a {comp.local} build, torch a {pin.local} one"
            found.append((Status.FAIL, summary, "", f"{name}{eq}{expected}+{pin.local}"))
        elif any(comp.spec.contains(v) for _, v in pairs):
            continue
        elif any(_same_minor(comp.spec, v) for _, v in pairs):
            if it.via == "pip":  # wheels pin torch to the patch release (torchvision's Requires-Dist)
                summary = f"{comp.text}: torch {torch_v} was released with {name} {expected}"
                found.append((Status.WARN, summary, "", f"{name}{eq}{expected}"))
        else:
            why = "Each torch release has its own torchvision and torchaudio (pytorch/vision's README table)."
            summary = (
                f"{comp.text} does not belong with {pin.text}: torch {torch_v} pairs with {name} {expected}"
            )
            found.append((Status.FAIL, summary, why, f"{name}{eq}{expected}"))
    return _result("spec.companions", found, "torch, torchvision and torchaudio belong together")


def _driver(it: SpecIntent) -> CheckResult:
    t, found = it.target, []
    spec = it.torch.spec if it.torch else None
    if it.variant == "cpu":
        plan = it.plan(torch=spec) if t.has_nvidia else None
        if t.has_nvidia:
            fix = f"for the GPU: {it.command(plan)}" if plan else ""
            found.append(
                (Status.WARN, "the file installs the CPU build; the target has an NVIDIA GPU", "", fix)
            )
        return _result("spec.driver", found, "the CPU build needs no driver")
    if it.cuda is None:
        return _result("spec.driver", [], "", skip="the file does not say which CUDA build it installs")
    driver = t.checked_driver
    if driver is None:
        return _result("spec.driver", [], "", skip="no target driver to check against (pass --driver)")
    verdict = rules.driver_floor(it.k, it.cuda, driver, windows=it.windows)
    floor, own = verdict.floor, None if it.major_only else verdict.toolkit_driver
    build = _build(it)
    coverage = [rules.arch_coverage(build, g.cc) for g in t.gpus] if build is not None else []
    on_driver = rules.build_on_driver(it.k, it.cuda, driver, coverage, windows=it.windows)
    what = f"CUDA {it.cuda.major}.x" if it.major_only else f"CUDA {it.cuda}"
    if verdict.status is rules.FloorStatus.UNKNOWN:
        return _result("spec.driver", [], "", skip=f"envkit does not know which driver {what} needs")
    if verdict.status is rules.FloorStatus.TOO_OLD:
        plan = it.plan(torch=spec)
        fix = (
            f"use {plan.variant}: {it.command(plan)}; " if plan else ""
        ) + f"or upgrade the driver to ≥ {own or floor}"
        why = "NVIDIA's minor-version-compatibility floor for the CUDA major (CUDA release notes, Table 2)."
        if verdict.reason is rules.FloorReason.TOOLKIT_DRIVER:
            why = f"The driver CUDA {verdict.cuda} shipped with (CUDA release notes, Table 3)."
        found.append((Status.FAIL, f"driver {driver} cannot run {what}: it needs {floor} or newer", why, fix))
    elif own is not None and driver < own and on_driver.status is not rules.BuildStatus.MINOR_VERSION:
        # rules.build_on_driver: the resolver's verdict too. SASS for every target GPU needs no JIT.
        mvc = (
            f"{what} shipped with driver {own} (NVIDIA's Table 3); below it minor-version compatibility "
            "runs SASS but cannot JIT-compile newer PTX ('the provided PTX was compiled with an "
            "unsupported toolchain', docs.nvidia.com/deploy/cuda-compatibility/)."
        )
        if on_driver.status is rules.BuildStatus.PTX_JIT:
            gpus = ", ".join(g.label for g in t.gpus if g.cc in on_driver.ptx_only)
            plan = it.plan(torch=spec)
            fix = (
                f"use {plan.variant}: {it.command(plan)}; " if plan else ""
            ) + f"or upgrade the driver to ≥ {own}"
            summary = f"{gpus} has only PTX in {what}'s build, which driver {driver} cannot JIT-compile"
            found.append((Status.FAIL, summary, mvc, fix))
        else:
            unknown = (
                "no target GPU given (pass --gpu)"
                if not t.gpus
                else "the build's architectures are not known"
            )
            summary = f"driver {driver} runs {what} only through minor-version compatibility"
            found.append(
                (
                    Status.WARN,
                    summary,
                    f"{mvc} Whether a GPU needs it: {unknown}.",
                    f"upgrade the driver to ≥ {own}",
                )
            )
    elif own is not None and driver < own:
        return _result(
            "spec.driver",
            [],
            f"driver {driver} runs {what} through minor-version compatibility (SASS for every GPU)",
        )
    return _result("spec.driver", found, f"driver {driver} runs {what}")


def _build(it: SpecIntent) -> Optional[rules.BuildArches]:
    """The exact architecture list of the file's build (an official wheel envkit knows), or None."""
    variant = it.variant
    if variant is None or variant_cuda(variant) is None:
        return None
    release = next((r for r in it.releases if any(variant in vs for vs in r.variants.values())), None)
    if release is None:
        return None
    build = rules.build_arches(
        it.k, torch=release.torch, variant=variant, platform=it.target.platform, or_linux=True
    )
    return build if build.exact else None


def _arch(it: SpecIntent) -> CheckResult:
    t, variant = it.target, it.variant
    if not t.gpus:
        return _result("spec.arch", [], "", skip="no target GPU to check against (pass --gpu)")
    if variant is None or variant_cuda(variant) is None:
        why = "a CPU build" if variant == "cpu" else "the file does not say which CUDA build it installs"
        return _result("spec.arch", [], "", skip=why)
    release = next((r for r in it.releases if any(variant in vs for vs in r.variants.values())), None)
    build = _build(it)
    if release is None or build is None:
        return _result("spec.arch", [], "", skip=f"envkit has no architecture list for this {variant} build")
    missing = [g.label for g in t.gpus if rules.arch_coverage(build, g.cc).runs is not True]
    found = []
    if missing:
        plan = it.plan()
        fix = f"torch {plan.torch}+{plan.variant} has it: {it.command(plan)}" if plan else ""
        why = f"It is built for {' '.join(build.names())} (arch.toml: {build.source})."
        found.append(
            (Status.FAIL, f"torch {release.torch} {variant} has no code for {', '.join(missing)}", why, fix)
        )
    return _result("spec.arch", found, f"torch {release.torch} {variant} has code for every target GPU")


def _index_findings(it: SpecIntent, m: Mirror, url: str) -> list[Finding]:
    """The --index-url: a flat listing, a variant the mirror lacks, a PyPI mirror asked for +cuXYZ."""
    spec, torch, variant = it.spec, it.spec.pip.get("torch"), variant_of_url(url)
    if m.kind is MirrorKind.TORCH_WHEELS and m.layout is Layout.FLAT:
        fix = f"--find-links {m.url}/{variant or 'VARIANT'}/"
        return [(Status.FAIL, f"{m.name} is a flat listing: pip reads it with --find-links", m.caveats, fix)]
    if m.kind is MirrorKind.TORCH_WHEELS and variant and not m.carries(variant):
        fix = f"--index-url https://download.pytorch.org/whl/{variant}"
        return [(Status.WARN, f"{m.name} is not known to carry {variant}", m.caveats, fix)]
    torch_index = any(variant_of_url(u) for u in (*spec.extra_index_urls, *spec.find_links))
    if m.kind is not MirrorKind.PYPI or torch is None or not torch.local or torch_index:
        return []
    r = it.releases[0] if it.releases else None
    default = f" (PyPI's torch {r.torch} is the {r.pypi_default} build)" if r else ""
    names = ", ".join(
        x.name for x in load_mirrors() if x.kind is MirrorKind.TORCH_WHEELS and x.layout is Layout.PEP503
    )
    why = "PyPI and its mirrors carry only the default CUDA build, with no +local version (tuna/issues#1050)."
    fix = (
        f"--index-url https://download.pytorch.org/whl/{torch.local} (or a torch-wheels mirror: {names}), "
        f"and --extra-index-url {m.url} for the other packages"
    )
    return [(Status.FAIL, f"{m.name} serves only PyPI's torch{default}; {torch.text} is not on it", why, fix)]


def _mirror(it: SpecIntent) -> CheckResult:
    spec, found, table = it.spec, [], load_mirrors()

    def row(url: str) -> Optional[Mirror]:
        bare = split_credentials(url)[0].rstrip("/")
        return next((m for m in table if bare == m.url or bare.startswith(m.url + "/")), None)

    torch = spec.pip.get("torch")
    index = row(spec.index_url) if spec.index_url else None
    if spec.index_url and index is not None:
        found += _index_findings(it, index, spec.index_url)
    for url in spec.extra_index_urls:
        variant = variant_of_url(url)
        if variant and torch is not None and not torch.local and torch.spec is not None:
            why = (
                "pip takes the highest version from any index: PyPI's default build may win (pypa/pip#8606)."
            )
            summary = f"the {variant} index is only an extra index and torch is not pinned to +{variant}"
            found.append(
                (Status.WARN, summary, why, f"--index-url {url} (replacing PyPI), or torch==X.Y.Z+{variant}")
            )
        if "/nightly" in url:
            why = (
                "A dependency-confusion risk: pip took a malicious torchtriton from PyPI over the nightly "
                "index's own (pytorch.org/blog/compromised-nightly-dependency/, Dec 2022)."
            )
            found.append(
                (Status.WARN, "the nightly index as an --extra-index-url", why, f"--index-url {url}")
            )
    urls = [u for u in (*spec.extra_index_urls, *spec.find_links) if u]
    pypi_only = all((m := row(u)) is not None and m.kind is MirrorKind.PYPI for u in urls)
    if torch is not None and torch.local and spec.index_url is None and pypi_only:
        summary = f"{torch.text}: PyPI has no +{torch.local} build, and the file names no torch index"
        why = "PyPI carries one build per release, without a local version (tuna/issues#1050)."
        fix = f"--index-url https://download.pytorch.org/whl/{torch.local} (and PyPI as --extra-index-url)"
        found.append((Status.FAIL, summary, why, fix))
    for channel in spec.channels:
        m = row(channel) if "://" in channel else None
        name = channel.rstrip("/")[len(m.url) + 1 :] if m is not None else ""
        if m is not None and m.kind is MirrorKind.CONDA and name and name not in m.channels:
            fix = f"use `{name}` (anaconda.org) or a mirror that carries it"
            found.append((Status.FAIL, f"{m.name} does not mirror the {name} channel", m.caveats, fix))
    named = (
        spec.index_url or spec.extra_index_urls or spec.find_links or any("://" in c for c in spec.channels)
    )
    return _result(
        "spec.mirror",
        found,
        "the indexes and mirrors serve what is asked of them",
        skip="" if named else "the file names no index or mirror",
    )


def check_spec(path: Union[str, Path], knowledge: Knowledge, target: Target) -> list[CheckResult]:
    """check_spec_noted's results alone."""
    return check_spec_noted(path, knowledge, target)[0]


def check_spec_noted(
    path: Union[str, Path], knowledge: Knowledge, target: Target
) -> tuple[list[CheckResult], list[str]]:
    """Check ``path`` for ``target``: a container file (Dockerfile, Apptainer definition, Compose
    file, Kubernetes manifest: envkit.specs.check_container's CONTAINER_CHECK_IDS), else an
    environment.yml (by its .yml/.yaml suffix) or a requirements.txt: one result per CHECK_IDS entry.
    InputError when the file cannot be read or is none of these (envkit.specs.read.NOT_A_SPEC).
    The notes say what the checks were made for where the file asks for more than the target
    shows (a CUDA file on a node without an NVIDIA GPU)."""
    if str(path) != "-":  # standard input is read once, as a spec
        from envkit._files import read_text
        from envkit.specs.check_container import check_container
        from envkit.specs.read_container import container_kind, read_container

        text = read_text(str(path))
        if container_kind(Path(path), text) is not None:
            return check_container(read_container(Path(path), text), knowledge, target), []
    if Path(path).name == "pixi.toml":
        from envkit._files import read_text
        from envkit.specs.pixi import read_pixi

        spec = read_pixi(str(path), read_text(str(path)), target.platform)
    else:
        spec = read_spec(Path(path))
    it = intent_of(spec, knowledge, target)
    notes = [it.here_note(str(path))] if it.planned_here else []
    return _checks(it), notes


def check_specfile(spec: SpecFile, knowledge: Knowledge, target: Target) -> list[CheckResult]:
    """The CHECK_IDS results of a spec already read: a file's, or what a project manifest installs
    on one platform (envkit.project reads pyproject.toml and pixi.toml into the same SpecFile)."""
    return _checks(intent_of(spec, knowledge, target))


def _checks(it: SpecIntent) -> list[CheckResult]:
    checks = (_cuda_packages, _channel, _companions, _driver, _arch, _mirror, _system_requirements)
    return [check(it) for check in checks]


def _system_requirements(it: SpecIntent) -> CheckResult:
    """pixi solves conda packages with ``[system-requirements] cuda`` as the machines' ``__cuda``:
    without it pixi picks no CUDA build ("Pixi will default to installing the CPU-only versions",
    prefix-dev/pixi:docs/python/pytorch.md@0196a795), with one the driver cannot meet pixi refuses
    the machine, and below the build's CUDA major conda-forge's cuda-version (``__cuda >=X``)
    cannot be installed."""
    check_id = "spec.system_requirements"
    spec = it.spec
    if spec.manifest != "pixi":
        return _result(check_id, [], "", skip="only pixi reads [system-requirements]")
    torch = it.torch
    gpu_build = (
        it.via == "conda"
        and torch is not None
        and (
            it.cuda is not None
            or torch.name == "pytorch-gpu"
            or (torch.build or "").lstrip("*").startswith("cuda")
        )
    )
    if not gpu_build:
        return _result(
            check_id, [], "", skip="torch is no conda CUDA build: pixi's __cuda chooses nothing here"
        )
    major = it.cuda.major if it.cuda is not None else None
    wanted = f'cuda = "{major}"' if major is not None else 'cuda = "12"'
    why = "pixi solves with [system-requirements] cuda as the machines' __cuda (pixi docs/python/pytorch.md)."
    if spec.system_cuda is None:
        summary = (
            "no [system-requirements] cuda: pixi solves without __cuda and installs no CUDA build of torch"
        )
        return _result(check_id, [(Status.FAIL, summary, why, f"add [system-requirements] {wanted}")], "")
    found: list[Finding] = []
    have = version_of_text(spec.system_cuda)
    if have is None:
        found.append(
            (
                Status.FAIL,
                f"[system-requirements] cuda = {spec.system_cuda!r} is no CUDA version",
                why,
                f"write {wanted}",
            )
        )
        return _result(check_id, found, "")
    if major is not None and have.major < major:
        summary = (
            f"[system-requirements] cuda = {spec.system_cuda!r} is below CUDA {major}, which the build needs"
        )
        detail = f"conda-forge's cuda-version {it.cuda} constrains __cuda >={major} (its feedstock's recipe)."
        found.append((Status.FAIL, summary, detail, f"write {wanted}"))
    driver = it.target.checked_driver
    runs = it.k.cuda_for_driver(driver, windows=it.windows) if driver is not None else None
    if driver is not None and (runs is None or have > runs):
        most = f"CUDA {runs}" if runs is not None else "no CUDA envkit knows"
        summary = (
            f"pixi refuses this machine: [system-requirements] cuda = {spec.system_cuda!r}, its driver "
            f"{driver} runs {most}"
        )
        detail = (
            "pixi checks the system requirements against the machine's virtual packages before it installs."
        )
        fix = f"write {wanted} (the build's CUDA major), or upgrade the driver"
        found.append((Status.FAIL, summary, detail, fix))
    ok = f"[system-requirements] cuda = {spec.system_cuda!r} lets pixi pick the CUDA build" + (
        f", and driver {driver} meets it" if driver is not None else ""
    )
    return _result(check_id, found, ok)


def version_of_text(text: str) -> Optional[Version]:
    try:
        return Version(text.strip())
    except ValueError:
        return None
