"""GPU names as pastes and flags spell them resolve to compute capabilities through gpus.toml;
an unknown name stays unknown (a note, never a guess)."""

from __future__ import annotations

import pytest

from envkit.detect.collect_env import parse_collect_env
from envkit.errors import InputError
from envkit.knowledge import gpu_name_spellings, load_knowledge
from envkit.resolve.target import parse_gpu

K = load_knowledge()

# nvidia-smi's own spellings, as collect_env prints them ("GPU 0: <name>"), from the threads of the
# diagnosis corpus (tests/data/diagnosis/cases) and NVIDIA's CUDA GPUs table.
NVIDIA_SMI_NAMES = [
    ("NVIDIA A10G", "8.6"),  # NVIDIA/apex#1545 (AWS g5)
    ("NVIDIA H200 NVL", "9.0"),  # Mohinta2892/catena#43
    ("GeForce RTX 3090", "8.6"),  # ml-struct-bio/cryodrgn#91: a 2020 driver, no "NVIDIA " prefix
    ("NVIDIA GeForce RTX 3090", "8.6"),
    ("NVIDIA GeForce RTX 5060 Ti", "12.0"),  # stemrollerapp/stemroller#102, remsky/Kokoro-FastAPI#306
    ("NVIDIA GeForce RTX 5070 Laptop GPU", "12.0"),  # coendevente/SlicerNNInteractive#58
    ("Tesla V100-SXM2-32GB", "7.0"),
    ("Tesla P100-PCIE-16GB", "6.0"),
    ("NVIDIA A100-SXM4-80GB", "8.0"),
    ("NVIDIA A800 80GB PCIe", "8.0"),
    ("NVIDIA H20", "9.0"),
    ("NVIDIA RTX PRO 5000 Blackwell", "12.0"),
]


@pytest.mark.parametrize(("name", "cc"), NVIDIA_SMI_NAMES)
def test_nvidia_smi_names_in_a_paste_get_their_compute_capability(name: str, cc: str) -> None:
    facts = parse_collect_env(f"Is CUDA available: True\nGPU models and configuration: GPU 0: {name}\n")
    assert [g.name for g in facts.gpus] == [name]
    assert str(facts.gpus[0].compute_capability) == cc
    assert not [n for n in facts.notes if "does not know its compute capability" in n]


@pytest.mark.parametrize(
    ("spelling", "cc"),
    [
        ("NVIDIA  GeForce RTX  3090", "8.6"),  # a hard-wrapped line joined again
        ("NVIDIA GeForce(R) RTX(TM) 3090", "8.6"),
        ("NVIDIA GeForce® RTX™ 4090", "8.9"),
        ("NVIDIA_A100-SXM4-80GB", "8.0"),  # a Kubernetes node label's spelling
        ("NVIDIA A100-SXM4- 80GB", "8.0"),  # wrapped after the hyphen
        ("RTX5090", "12.0"),
        ("rtx 5060 ti", "12.0"),
        ("GTX1080Ti", "6.1"),
    ],
)
def test_other_spellings_are_normalised(spelling: str, cc: str) -> None:
    gpu = K.gpu_named(spelling)
    assert gpu is not None, gpu_name_spellings(spelling)
    assert str(gpu.cc) == cc
    assert str(parse_gpu(spelling, K).cc) == cc  # --gpu takes them too


def test_the_name_as_given_is_tried_first() -> None:
    assert gpu_name_spellings("NVIDIA A10G") == ("NVIDIA A10G",)
    assert gpu_name_spellings("NVIDIA_GeForce_RTX3090")[0] == "NVIDIA_GeForce_RTX3090"
    assert gpu_name_spellings("NVIDIA_GeForce_RTX3090")[-1] == "NVIDIA GeForce RTX 3090"


def test_an_unknown_name_is_a_note_never_a_guess() -> None:
    facts = parse_collect_env(
        "Is CUDA available: True\nGPU models and configuration:\nGPU 0: NVIDIA A10G\nGPU 1: Acme Graphics 9000\n"
    )
    assert [str(g.compute_capability) for g in facts.gpus] == ["8.6", "None"]
    assert any("GPU 1 (Acme Graphics 9000)" in n and "does not know" in n for n in facts.notes)
    assert K.gpu_named("Acme Graphics 9000") is None
    assert K.gpu_named("NVIDIA") is None and K.gpu_named("") is None
    with pytest.raises(InputError, match="not a compute capability"):
        parse_gpu("Acme Graphics 9000", K)
