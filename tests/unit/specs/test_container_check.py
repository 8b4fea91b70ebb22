"""spec --check on container files: real Dockerfiles, Compose files and Kubernetes manifests from
public repositories (tests/data/README.md says where each comes from), and the round trip of what
spec --format docker / apptainer writes."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from envkit.errors import InputError
from envkit.knowledge import load_knowledge
from envkit.report import CheckResult, Status
from envkit.resolve.target import Target
from envkit.specs.check import check_spec
from envkit.specs.check_container import CONTAINER_CHECK_IDS, image_cuda
from envkit.specs.read_container import container_kind, read_container
from envkit.specs.render import render_specs
from envkit.specs.template import load_template
from envkit.versions import NvVersion, Version
from tests.unit.specs.test_specs import plan

FILES = Path(__file__).parents[2] / "data" / "containers" / "files"
K = load_knowledge()


def _check(
    name: str, driver: Optional[str] = "535.104.05", path: Optional[Path] = None
) -> dict[str, CheckResult]:
    target = Target("linux-x86_64", NvVersion(driver) if driver else None)
    results = check_spec(path or FILES / name, K, target)
    assert [r.id for r in results] == list(CONTAINER_CHECK_IDS)
    return {r.id: r for r in results}


def test_the_kind_comes_from_the_name_and_the_content(tmp_path: Path) -> None:
    kinds = {p.name: container_kind(p, p.read_text(encoding="utf-8")) for p in FILES.iterdir()}
    assert kinds["elzaggo-docker-pytorch.Dockerfile"] == "dockerfile"
    assert kinds["thr3a-compose.yml"] == "compose"  # a services map
    assert kinds["mrCR100-k8s-ollama.yaml"] == "kubernetes"  # apiVersion + kind, several documents
    env = tmp_path / "environment.yml"
    env.write_text("dependencies: [python=3.11]\n", encoding="utf-8")
    assert container_kind(env, env.read_text(encoding="utf-8")) is None
    bare = tmp_path / "build-me"
    bare.write_text("# a comment\nARG X=1\nFROM nvidia/cuda:12.8.0-runtime-ubuntu24.04\n", encoding="utf-8")
    assert container_kind(bare, bare.read_text(encoding="utf-8")) == "dockerfile"


def test_image_cuda_from_the_table_and_from_tags() -> None:
    assert image_cuda("nvidia/cuda:12.8.0-runtime-ubuntu24.04", K)[0] == Version("12.8.0")
    assert image_cuda("nvcr.io/nvidia/cuda:12.6.3-cudnn-devel-ubuntu24.04", K)[0] == Version("12.6.3")
    assert image_cuda("pytorch/pytorch:2.6.0-cuda12.6-cudnn9-devel", K)[0] == Version("12.6")
    assert image_cuda("ollama/ollama:latest", K) is None
    assert image_cuda("nvidia/cuda:latest", K) is None  # no version in the tag: not guessed


def test_pip_install_torch_without_an_index_gets_pypis_cu13_build() -> None:
    """elzaggo/docker-pytorch: ``FROM $BASE`` (an ARG default) and ``pip install torch torchvision``."""
    c = read_container(FILES / "elzaggo-docker-pytorch.Dockerfile")
    assert [i.ref for i in c.images] == ["nvidia/cuda:9.0-cudnn7-devel-ubuntu16.04"]
    found = _check("elzaggo-docker-pytorch.Dockerfile")
    torch = found["container.torch"]
    release = K.releases[0]
    default = release.pypi_variant("linux-x86_64")
    assert torch.status is Status.FAIL and f"({default})" in torch.summary
    assert "line 12" in torch.summary and "--index-url https://download.pytorch.org/whl/cu12" in torch.fix
    # A driver that runs PyPI's build: still a warning, the build follows PyPI's default.
    assert _check("elzaggo-docker-pytorch.Dockerfile", "580.65.06")["container.torch"].status is Status.WARN
    # No driver: which build it is, and what it needs.
    assert "580" in _check("elzaggo-docker-pytorch.Dockerfile", None)["container.torch"].detail


def test_the_from_images_cuda_against_the_driver() -> None:
    """thr3a/docker-build-station: nvcr.io/nvidia/cuda:12.6.3 and torch from the cu126 index."""
    old = _check("thr3a-cuda12.6-torch.Dockerfile", "520.61.05")
    assert old["container.image"].status is Status.FAIL
    assert "upgrade the driver to ≥" in old["container.image"].fix
    assert old["container.torch"].status is Status.FAIL  # cu126 on a CUDA 11 driver
    mvc = _check("thr3a-cuda12.6-torch.Dockerfile", "535.104.05")
    assert mvc["container.image"].status is Status.WARN
    assert "FROM nvidia/cuda:12.2.2-runtime-ubuntu20.04" in mvc["container.image"].fix
    ok = _check("thr3a-cuda12.6-torch.Dockerfile", "570.124.06")
    assert ok["container.image"].status is Status.PASS and ok["container.torch"].status is Status.PASS
    assert ok["container.gpu"].status is Status.SKIP and "--gpus all" in ok["container.gpu"].summary
    # alufia/test: pytorch/pytorch's tag names the CUDA.
    assert _check("alufia-test.Dockerfile", "520.61.05")["container.image"].status is Status.FAIL
    assert _check("alufia-test.Dockerfile", None)["container.image"].status is Status.SKIP


def test_compose_services_gpu_reservation_and_shm(tmp_path: Path) -> None:
    good = _check("thr3a-compose.yml")  # a device reservation with capabilities: [gpu], ipc: host
    assert good["container.gpu"].status is Status.PASS and good["container.shm"].status is Status.PASS
    legacy = _check("docker-docs-compose-runtime.yml")  # docker/docs: the v2.3 runtime: nvidia form
    assert legacy["container.gpu"].status is Status.WARN
    assert "capabilities: [gpu]" in legacy["container.gpu"].fix
    assert legacy["container.shm"].status is Status.WARN and "ipc: host" in legacy["container.shm"].fix
    # The same file without runtime: nvidia: a CUDA image with no GPU at all.
    bare = tmp_path / "compose.yaml"
    text = (FILES / "docker-docs-compose-runtime.yml").read_text(encoding="utf-8")
    bare.write_text(text.replace("    runtime: nvidia\n", ""), encoding="utf-8")
    assert _check("", path=bare)["container.gpu"].status is Status.FAIL


def test_kubernetes_gpu_limits_runtime_class_and_shm(tmp_path: Path) -> None:
    ollama = _check("mrCR100-k8s-ollama.yaml")
    assert ollama["container.gpu"].status is Status.PASS
    shm = ollama["container.shm"]
    assert shm.status is Status.WARN and "Deployment/ollama3gpu container ollama" in shm.summary
    assert "medium: Memory" in shm.fix and "mountPath: /dev/shm" in shm.fix
    pod = _check("mrCR100-k8s-gpu-pod.yaml")
    assert pod["container.gpu"].status is Status.PASS
    # Derived from the real pod: requests without limits, and no runtimeClassName.
    text = (FILES / "mrCR100-k8s-gpu-pod.yaml").read_text(encoding="utf-8")
    changed = tmp_path / "pod.yaml"
    changed.write_text(
        text.replace("        limits:\n          nvidia.com/gpu: 2 # requesting 2 GPU\n", "").replace(
            "quay.io/centos/centos", "nvcr.io/nvidia/pytorch:25.12-py3"
        ),
        encoding="utf-8",
    )
    gpu = _check("", path=changed)["container.gpu"]
    assert gpu.status is Status.FAIL and "without a limit" in gpu.summary
    assert "resources.limits: {nvidia.com/gpu: 1}" in gpu.fix
    no_class = tmp_path / "no-class.yaml"
    no_class.write_text(text.replace("  runtimeClassName: nvidia\n", ""), encoding="utf-8")
    assert "runtimeClassName: nvidia" in _check("", path=no_class)["container.gpu"].detail


@pytest.mark.parametrize("fmt", ["docker", "apptainer"])
def test_what_spec_format_writes_checks_clean_on_its_target(tmp_path: Path, fmt: str) -> None:
    p = plan("570.124.06", "sm_90", cuda="12.8", python="3.12")
    for name, text in render_specs(p, load_template("pt2"), fmt).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    name = "Dockerfile" if fmt == "docker" else "Apptainer.def"
    results = check_spec(tmp_path / name, K, p.target)
    assert [r.id for r in results] == list(CONTAINER_CHECK_IDS)
    bad = [(r.id, r.summary) for r in results if r.status in (Status.FAIL, Status.WARN)]
    assert bad == []
    by_id = {r.id: r for r in results}
    assert by_id["container.image"].status is Status.PASS  # the -r file was followed through COPY / %files
    assert by_id["container.torch"].status is Status.PASS
    # On a CUDA 11 driver the same file fails: the image and the torch build, each with its fix.
    old = {r.id: r for r in check_spec(tmp_path / name, K, Target("linux-x86_64", NvVersion("520.61.05")))}
    assert old["container.image"].status is Status.FAIL and old["container.torch"].status is Status.FAIL
    assert "--index-url https://download.pytorch.org/whl/cu118" in old["container.torch"].fix


def test_a_file_of_no_known_kind_is_still_refused(tmp_path: Path) -> None:
    odd = tmp_path / "notes.yaml"
    odd.write_text("- just\n- a list\n", encoding="utf-8")
    with pytest.raises(InputError):
        check_spec(odd, K, Target("linux-x86_64"))
    with pytest.raises(InputError, match="not a Dockerfile"):
        read_container(odd)


def test_a_template_asks_for_an_ngc_or_pytorch_base(tmp_path: Path) -> None:
    template = tmp_path / "ngc.toml"
    template.write_text('name = "ngc"\ndescription = "NGC"\nbase = "ngc"\n', encoding="utf-8")
    p = plan("580.65.06", "sm_90", cuda="13.0", python="3.12")
    if p.cuda is None or p.cuda.major != 13:
        pytest.skip(f"the knowledge base plans {p.variant} here, not a CUDA 13 build")
    files = render_specs(p, load_template(str(template)), "docker")
    assert "FROM nvcr.io/nvidia/pytorch:25.12-py3\n" in files["Dockerfile"]
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\ndescription = "x"\nbase = "alpine"\n', encoding="utf-8")
    with pytest.raises(InputError, match="field 'base'"):
        load_template(str(bad))
