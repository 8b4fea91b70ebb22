"""The NFD feature file, read back as nfd-worker reads it, every label checked as Kubernetes checks
labels; and the node-problem-detector plugin's message."""

from __future__ import annotations

import dataclasses
import datetime
import re
from typing import Optional

from hypothesis import strategies as st

from envkit.commands.doctor import diagnose_file
from envkit.facts import DriverFacts, HostFacts
from envkit.render.nfd import LABEL_PREFIX, feature_file, label_value, node_labels
from envkit.render.npd import NPD_MAX_OUTPUT, npd_message
from envkit.report import CheckResult, Report, Status
from envkit.versions import NvVersion, Version
from tests.conftest import DATA, check_property, examples

H200 = DATA / "reports" / "h200-580-torch2.11-cu130.json"

# Kubernetes' label rules (kubernetes/apimachinery pkg/api/validate/content/kube.go and dns.go,
# v0.35.7 as vendored by kubernetes/node-problem-detector@6632ca67): a value is empty or at most
# 63 characters of [-A-Za-z0-9_.] with [A-Za-z0-9] at both ends; a key is an optional DNS-1123
# subdomain prefix (at most 253) and "/", then a name of the same shape as a value (not empty).
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def valid_label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and _NAME.match(value) is not None)


def valid_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and _NAME.match(name) is not None


def read_feature_file(text: str, now: datetime.datetime) -> dict[str, str]:
    """nfd-worker's reading (kubernetes-sigs/node-feature-discovery source/local/local.go@76e6cc8c,
    parseFeatureFile): lines trimmed, blank ones skipped; a "#" line is a comment unless it is a
    "# +" directive; "# +expiry-time=<RFC 3339>" makes the lines after it count only while it is in
    the future (the expiry starts as "now", which is not before now); "<key>[=<value>]", a bare key
    meaning "true". Files over 64 KiB are ignored whole."""
    assert len(text.encode()) <= 65536
    labels: dict[str, str] = {}
    expiry = now
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith("# +"):
                key, _, value = line[3:].partition("=")
                assert key == "expiry-time", line
                expiry = datetime.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            continue
        if expiry < now:
            continue
        key, sep, value = line.partition("=")
        labels[key] = value if sep else "true"
    return labels


def h200() -> Report:
    return diagnose_file(str(H200))


def test_the_h200_node_gets_labels_pods_can_select_on() -> None:
    now = datetime.datetime.now(datetime.timezone.utc)
    labels = read_feature_file(feature_file(h200()), now)
    short = {k.removeprefix(LABEL_PREFIX): v for k, v in labels.items()}
    assert short == {
        "version": short["version"],
        "healthy": "true",
        "driver.version": "580.159.04",
        "driver.branch": "580",
        "driver.cuda": "13.0",
        "driver.cuda-int": "13000",
        "gpu.count": "1",
        "gpu.vendor": "nvidia",
        "gpu.model": "NVIDIA-H200",
        "gpu.arch": "sm_90",
        "gpu.compute-capability": "9.0",
        "torch.version": "2.11.0",
        "torch.variant": "cu130",
        "torch.cuda": "13.0",
        "python.version": "3.12",
    }
    assert all(valid_label_key(k) and valid_label_value(v) for k, v in labels.items())


def test_an_unhealthy_node_says_so_and_names_the_check() -> None:
    failing = CheckResult("gpu.health", Status.FAIL, "GPU 3 has 12 volatile uncorrected ECC errors")
    report = dataclasses.replace(h200(), checks=(*h200().checks, failing))
    labels = node_labels(report)
    assert labels[LABEL_PREFIX + "healthy"] == "false"
    assert labels[LABEL_PREFIX + "cause"] == "gpu.health"


def test_expiry_is_nfds_directive_and_nfd_drops_the_labels_after_it() -> None:
    when = datetime.datetime(2026, 12, 2, 10, 5, tzinfo=datetime.timezone.utc)
    text = feature_file(h200(), expires=when)
    assert "# +expiry-time=2026-12-02T10:05:00Z\n" in text
    assert read_feature_file(text, when - datetime.timedelta(seconds=1))
    assert read_feature_file(text, when + datetime.timedelta(seconds=1)) == {}


def test_the_cuda_integer_is_cudas_own_encoding() -> None:
    report = h200()
    facts = dataclasses.replace(
        report.facts, driver=DriverFacts(version=NvVersion("550.54.15"), cuda_version=Version("12.4"))
    )
    labels = node_labels(dataclasses.replace(report, facts=facts))
    assert labels[LABEL_PREFIX + "driver.cuda-int"] == "12040"  # cudaDriverGetVersion's 12040


SECRET = "ghp_abcdefSECRET123"


def test_hostile_names_and_versions_become_valid_values_without_secrets() -> None:
    report = h200()
    gpu = dataclasses.replace(
        report.facts.gpus[0], name=f"  ..NVIDIA\x1b[2J H200 ñ TOKEN={SECRET} {'x' * 80}--"
    )
    facts = dataclasses.replace(report.facts, gpus=(gpu,), host=HostFacts(env={"GITHUB_TOKEN": SECRET}))
    text = feature_file(dataclasses.replace(report, facts=facts))
    assert SECRET not in text
    labels = read_feature_file(text, datetime.datetime.now(datetime.timezone.utc))
    model = labels[LABEL_PREFIX + "gpu.model"]
    assert model.startswith("NVIDIA-2J-H200-TOKEN")
    assert all(valid_label_key(k) and valid_label_value(v) for k, v in labels.items())


@examples(60, 1000)
def test_any_text_becomes_a_valid_label_value_or_none(max_examples: int) -> None:
    check_property(max_examples, _valid_or_none, st.text(max_size=200))


def _valid_or_none(text: str) -> None:
    value = label_value(text)
    assert value is None or (value and valid_label_value(value)), (text, value)


def test_label_values_keep_what_is_already_valid() -> None:
    assert label_value("9.0_8.6") == "9.0_8.6"
    assert label_value("-._") is None
    assert label_value("a" * 100) == "a" * 63
    assert label_value("a" * 62 + "-b") == "a" * 62  # cut at 63, then no "-" at the end


# --- node-problem-detector -------------------------------------------------------------------------


def test_npd_message_is_one_ascii_line_within_npds_limit() -> None:
    reason = "envkit: nccl.busbw: 301 GB/s, below 0.8 × 431 GB/s (need ≥ 345) — NVLink … " + "x" * 100
    message = npd_message(reason, {})
    assert message.isascii() and "\n" not in message
    assert len(message) == NPD_MAX_OUTPUT and message.endswith("...")
    assert message.startswith("envkit: nccl.busbw: 301 GB/s, below 0.8 x 431 GB/s (need >= 345) - NVLink")


def test_npd_message_when_healthy_is_a_tally() -> None:
    assert npd_message(None, {"pass": 6, "warn": 1, "skip": 11}) == "envkit: healthy (6 passed, 1 warned)"


def test_npd_message_redacts() -> None:
    message: Optional[str] = npd_message(f"envkit: torch.installed: https://u:{SECRET}@pypi.example/", {})
    assert message is not None and SECRET not in message


def test_an_amd_node_gets_its_vendor_and_gfx_arch() -> None:
    from envkit.facts import AccelGpu, VendorFacts

    # As the recorded MI300X tree reads (tests/data/amd/mi300x-x8-cpx: gfx942, device 0x74a1).
    amd = VendorFacts(
        "amd", gpus=tuple(AccelGpu(i, name="AMD Instinct MI300X", arch="gfx942") for i in range(8))
    )
    report = h200()
    report = dataclasses.replace(report, facts=dataclasses.replace(report.facts, gpus=(), amd=amd))
    labels = {k.removeprefix(LABEL_PREFIX): v for k, v in node_labels(report).items()}
    assert (labels["gpu.count"], labels["gpu.vendor"], labels["gpu.arch"]) == ("8", "amd", "gfx942")
    assert labels["gpu.model"] == "AMD-Instinct-MI300X"
    assert "gpu.compute-capability" not in labels
