"""envkit.detect.container and envkit.checks.container on recorded container trees.

Each tree is tests/data/containers/<name>.json (its ``source`` says where the environment and the
files come from: the images' own Dockerfile ENV lines, Apptainer's and Kubernetes' documented
variables), laid out under a temporary root and read through ``System`` like a real machine.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from envkit.checks import CHECKS, run_checks
from envkit.checks.container import (
    check_container_capabilities,
    check_container_cuda_driver,
    check_container_gpus,
    is_data_center_gpu,
)
from envkit.checks.shm import check_shm
from envkit.detect.container import detect_container, parse_require_cuda
from envkit.facts import (
    ContainerFacts,
    ContainerKind,
    DriverFacts,
    Facts,
    GpuFacts,
    HostFacts,
    TorchFacts,
    facts_from_json,
    facts_to_json,
)
from envkit.report import Status
from envkit.system import System
from envkit.versions import NvVersion, Version

DATA = Path(__file__).parents[2] / "data" / "containers"


def lay_out(tmp_path: Path, name: str, **env_changes: str) -> System:
    """The recorded container ``name`` as a System rooted in ``tmp_path``."""
    record: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    assert record["source"]
    for path, text in record["files"].items():
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for link, dest in record.get("symlinks", {}).items():
        target = tmp_path / link.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(dest, target)
    env = {**record["env"], **env_changes}
    return System(env={k: v for k, v in env.items() if v is not None}, root=tmp_path)


def facts_in(
    container: ContainerFacts, driver: str | None = None, gpu: str | None = "Tesla T4", **host: Any
) -> Facts:
    return Facts(
        host=HostFacts(**host),
        driver=DriverFacts(version=NvVersion(driver) if driver else None, source="nvml" if driver else None),
        gpus=(GpuFacts(0, name=gpu),) if gpu else (),
        container=container,
    )


def test_outside_a_container_nothing_is_read_and_every_check_skips(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia0").write_text("")
    container = detect_container(System(env={"CUDA_VERSION": "12.4.1"}, root=tmp_path))
    assert container == ContainerFacts()
    facts = facts_in(container, "550.54.15")
    for check in (check_container_gpus, check_container_cuda_driver, check_container_capabilities):
        result = check(facts)
        assert result.status is Status.SKIP
        assert result.summary == "not in a container"


def test_nvidia_cuda_base_image_under_docker(tmp_path: Path) -> None:
    c = detect_container(lay_out(tmp_path, "nvidia-cuda-12.0.0-base-docker"))
    assert c.kind is ContainerKind.DOCKER
    assert c.evidence == ("/.dockerenv",)
    assert (c.image_cuda, c.image_cuda_source) == (Version("12.0.0"), "CUDA_VERSION")
    assert c.require_cuda is not None and c.require_cuda.startswith("cuda>=12.0 ")
    # The host's libcuda, not the image's compat one (which /usr/local/cuda/compat also reaches).
    assert str(c.mounted_driver) == "470.182.03"
    assert c.mounted_driver_path == "/usr/lib/x86_64-linux-gnu/libcuda.so.470.182.03"
    assert c.device_nodes == ("/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl")
    assert (c.compat_dir, str(c.compat_driver), c.compat_on_loader_path) == (
        "/usr/local/cuda/compat",
        "525.60.13",
        False,
    )
    assert (c.visible_devices, c.driver_capabilities) == ("all", "compute,utility")


def test_r470_host_under_a_cuda_12_image_needs_forward_compatibility(tmp_path: Path) -> None:
    c = detect_container(lay_out(tmp_path, "nvidia-cuda-12.0.0-base-docker"))
    facts = facts_in(c, None, gpu="Tesla T4")
    assert check_container_gpus(facts).status is Status.PASS
    result = check_container_cuda_driver(facts)
    assert result.status is Status.FAIL
    assert "470.182.03 is too old for the image's CUDA 12.0.0" in result.summary
    assert "not on the loader path" in result.summary
    assert result.fix.startswith("export LD_LIBRARY_PATH=/usr/local/cuda/compat:$LD_LIBRARY_PATH")
    assert "525.60.13" in result.detail


def test_compat_on_the_loader_path_bridges_it_with_a_warning(tmp_path: Path) -> None:
    system = lay_out(
        tmp_path, "nvidia-cuda-12.0.0-base-docker", LD_LIBRARY_PATH="/usr/local/cuda-12.0/compat"
    )
    c = detect_container(system)
    assert c.compat_on_loader_path is True  # the same folder, reached through the symlink
    result = check_container_cuda_driver(facts_in(c, None, gpu="NVIDIA A100-SXM4-80GB"))
    assert result.status is Status.WARN
    assert "forward compatibility bridges it on these data-center GPUs" in result.summary


def test_forward_compatibility_is_not_for_geforce(tmp_path: Path) -> None:
    system = lay_out(tmp_path, "nvidia-cuda-12.0.0-base-docker", LD_LIBRARY_PATH="/usr/local/cuda/compat")
    result = check_container_cuda_driver(
        facts_in(detect_container(system), None, gpu="NVIDIA GeForce RTX 3090")
    )
    assert result.status is Status.FAIL
    assert "data-center GPUs only, not NVIDIA GeForce RTX 3090" in result.detail
    assert "upgrade the host's driver to 525.60.13 or newer" in result.fix


def test_pytorch_image_started_without_gpus(tmp_path: Path) -> None:
    c = detect_container(lay_out(tmp_path, "pytorch-runtime-docker-no-gpus"))
    assert c.kind is ContainerKind.DOCKER
    assert c.evidence == ("/.dockerenv", "/proc/1/cgroup: docker")
    assert c.image_cuda is None and c.mounted_driver is None and c.device_nodes == ()
    facts = facts_in(c, None, gpu=None)
    result = check_container_gpus(facts)
    assert result.status is Status.FAIL
    assert result.summary.startswith("started without GPUs")
    assert result.fix.startswith("docker run --gpus all")
    assert "NVIDIA_VISIBLE_DEVICES alone does nothing" in result.detail
    assert check_container_cuda_driver(facts).status is Status.SKIP


def test_a_cpu_container_without_gpus_is_not_a_failure(tmp_path: Path) -> None:
    # A plain container (a CI job: /.dockerenv, no CUDA image, no NVIDIA_* variables) with a CPU
    # torch asks for no GPU: their absence is not a finding. A CUDA build of torch there is.
    (tmp_path / ".dockerenv").write_text("", encoding="utf-8")
    c = detect_container(System(env={}, root=tmp_path))
    assert c.kind is ContainerKind.DOCKER and c.image_cuda is None and c.visible_devices is None
    cpu = dataclasses.replace(
        facts_in(c, None, gpu=None), torch=TorchFacts(version=Version("2.13.0+cpu"), location="/s")
    )
    result = check_container_gpus(cpu)
    assert result.status is Status.SKIP
    assert result.summary == "a container without GPUs, and nothing here asks for one"
    cuda = dataclasses.replace(
        cpu, torch=TorchFacts(version=Version("2.13.0+cu130"), cuda=Version("13.0"), location="/s")
    )
    failed = check_container_gpus(cuda)
    assert failed.status is Status.FAIL and failed.summary.startswith("started without GPUs")
    assert "a CUDA build of torch (2.13.0+cu130)" in failed.detail


def test_apptainer_with_nv(tmp_path: Path) -> None:
    c = detect_container(lay_out(tmp_path, "apptainer-nv"))
    assert c.kind is ContainerKind.APPTAINER
    assert c.evidence == ("APPTAINER_CONTAINER", "/.singularity.d")
    assert c.mounted_driver_path == "/.singularity.d/libs/libcuda.so.550.54.15"
    assert c.compat_dir is None and c.compat_on_loader_path is None
    facts = facts_in(c, "550.54.15", gpu="NVIDIA H100 80GB HBM3")
    assert check_container_gpus(facts).status is Status.PASS
    # CUDA 12.4's toolkit driver is 550.54.14: 550.54.15 runs it in full.
    assert check_container_cuda_driver(facts).status is Status.PASS
    assert check_container_capabilities(facts).status is Status.PASS


def test_apptainer_without_nv_has_devices_but_no_driver(tmp_path: Path) -> None:
    system = lay_out(tmp_path, "apptainer-nv")
    for lib in (tmp_path / ".singularity.d" / "libs").iterdir():
        lib.unlink()
    facts = facts_in(detect_container(system), None, gpu=None)
    result = check_container_gpus(facts)
    assert result.status is Status.FAIL
    assert "no driver library" in result.summary
    assert result.fix.startswith("apptainer exec --nv")


def test_kubernetes_pod_with_an_ngc_image(tmp_path: Path) -> None:
    c = detect_container(lay_out(tmp_path, "kubernetes-pod"))
    assert c.kind is ContainerKind.KUBERNETES
    assert c.evidence == ("KUBERNETES_SERVICE_HOST", "/proc/1/cgroup: kubepods")
    assert c.image_cuda == Version("12.8.0.038")
    assert str(c.mounted_driver) == "535.183.06"
    assert (c.compat_dir, str(c.compat_driver), c.compat_on_loader_path) == (
        "/usr/local/cuda/compat/lib",
        "570.86.10",
        False,
    )
    assert c.device_nodes == ("/dev/nvidia-uvm", "/dev/nvidia3", "/dev/nvidiactl")
    facts = facts_in(c, "535.183.06", gpu="NVIDIA A100-SXM4-80GB")
    assert check_container_gpus(facts).status is Status.PASS
    result = check_container_cuda_driver(facts)
    # 535 is above CUDA 12.x's floor but below 12.8's own driver: minor-version compatibility.
    assert result.status is Status.WARN
    assert "minor-version compatibility" in result.summary
    assert "or use an image with CUDA 12.2 or older" in result.fix


def test_kubernetes_pod_without_a_gpu_limit(tmp_path: Path) -> None:
    system = lay_out(tmp_path, "kubernetes-pod")
    for name in ("nvidia3", "nvidiactl", "nvidia-uvm"):
        (tmp_path / "dev" / name).unlink()
    (tmp_path / "usr/lib/x86_64-linux-gnu/libcuda.so.535.183.06").unlink()
    result = check_container_gpus(facts_in(detect_container(system), None, gpu=None))
    assert result.status is Status.FAIL
    assert "nvidia.com/gpu: 1" in result.fix and "runtimeClassName: nvidia" in result.fix


@pytest.mark.parametrize(
    ("caps", "status", "words"),
    [
        ("compute,utility", Status.PASS, "compute,utility"),
        ("all", Status.PASS, "=all"),
        ("utility", Status.FAIL, "no 'compute'"),
        ("compute", Status.WARN, "no 'utility'"),
        ("", Status.PASS, "unset"),
    ],
)
def test_driver_capabilities(tmp_path: Path, caps: str, status: Status, words: str) -> None:
    c = detect_container(lay_out(tmp_path, "kubernetes-pod", NVIDIA_DRIVER_CAPABILITIES=caps))
    result = check_container_capabilities(facts_in(c, "535.183.06"))
    assert result.status is status
    assert words in result.summary
    if status is not Status.PASS:
        assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in result.fix


def test_visible_devices_none(tmp_path: Path) -> None:
    c = detect_container(lay_out(tmp_path, "kubernetes-pod", NVIDIA_VISIBLE_DEVICES="none"))
    result = check_container_gpus(facts_in(c, "535.183.06"))
    assert result.status is Status.FAIL
    assert "NVIDIA_VISIBLE_DEVICES=none" in result.summary


def test_image_cuda_from_version_json_then_require_cuda(tmp_path: Path) -> None:
    (tmp_path / ".dockerenv").write_text("")
    (tmp_path / "usr/local/cuda").mkdir(parents=True)
    (tmp_path / "usr/local/cuda/version.json").write_text(
        '{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}', encoding="utf-8"
    )
    c = detect_container(System(env={"NVIDIA_REQUIRE_CUDA": "cuda>=12.2"}, root=tmp_path))
    assert (c.image_cuda, c.image_cuda_source) == (Version("12.4.1"), "/usr/local/cuda/version.json")
    (tmp_path / "usr/local/cuda/version.json").write_text("not json", encoding="utf-8")
    c = detect_container(System(env={"NVIDIA_REQUIRE_CUDA": "cuda>=12.2"}, root=tmp_path))
    assert (c.image_cuda, c.image_cuda_source) == (Version("12.2"), "NVIDIA_REQUIRE_CUDA")


def test_parse_require_cuda() -> None:
    assert parse_require_cuda("cuda>=11.8 brand=tesla,driver>=470,driver<471") == Version("11.8")
    assert parse_require_cuda("brand=tesla,driver>=470") is None


def test_data_center_gpus() -> None:
    assert is_data_center_gpu("NVIDIA A10G") is True
    assert is_data_center_gpu("Tesla V100-SXM2-32GB") is True
    assert is_data_center_gpu("NVIDIA RTX A6000") is False
    assert is_data_center_gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition") is True
    assert is_data_center_gpu(None) is None


def test_shm_fix_names_the_container_flag(tmp_path: Path) -> None:
    small = 64 * 1024 * 1024
    docker = detect_container(lay_out(tmp_path / "d", "pytorch-runtime-docker-no-gpus"))
    result = check_shm(facts_in(docker, shm_bytes=small))
    assert result.status is Status.FAIL
    assert result.fix.startswith("docker run --ipc=host")
    k8s = detect_container(lay_out(tmp_path / "k", "kubernetes-pod"))
    assert "emptyDir with medium: Memory" in check_shm(facts_in(k8s, shm_bytes=small)).fix
    # Outside a container: the host's remount is among the fixes.
    assert "remount" in check_shm(facts_in(ContainerFacts(), shm_bytes=small)).fix


def test_registered_and_round_trip(tmp_path: Path) -> None:
    assert {"container.gpus", "container.cuda_driver", "container.capabilities"} <= set(CHECKS)
    c = detect_container(lay_out(tmp_path, "kubernetes-pod"))
    facts = facts_in(c, "535.183.06")
    assert facts_from_json(json.loads(json.dumps(facts_to_json(facts)))) == facts
    # A report saved before the field existed reads as "no container".
    data = facts_to_json(facts)
    del data["container"]
    assert facts_from_json(data).container == ContainerFacts()
    results = {r.id: r for r in run_checks(facts, ["container.gpus", "container.cuda_driver"])}
    assert results["container.gpus"].status is Status.PASS


def test_a_detector_that_did_not_answer_is_unknown_not_absent() -> None:
    facts = dataclasses.replace(facts_in(ContainerFacts(), "535.183.06"), unknown=("container",))
    result = check_container_gpus(facts)
    assert result.status is Status.SKIP
    assert "did not answer" in result.summary
