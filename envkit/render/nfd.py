"""A report as Node Feature Discovery labels (``preflight --nfd-labels FILE``): a feature file for
nfd-worker's ``local`` source, so that pods can select the nodes that run their build.

The file format is NFD's (kubernetes-sigs/node-feature-discovery docs/usage/customization-guide.md,
"Local feature source", and source/local/local.go@76e6cc8c): one ``<namespace>/<name>=<value>``
per line, ``#`` comments, a ``# +expiry-time=<RFC 3339>`` directive after which the lines below it
are ignored, at most 64 KiB, read from ``/etc/kubernetes/node-feature-discovery/features.d/``;
dot files are ignored, so envkit's temporary file (``.NAME.…``, renamed over NAME) is never read
half-written. The namespace is NFD's own, ``feature.node.kubernetes.io``, which nfd-master always
accepts (pkg/apis/nfd/validate/validate.go: other ``*.kubernetes.io`` namespaces are denied, and a
site may deny any other with ``-deny-label-ns``), with an ``envkit-`` name prefix.

Every value is a valid Kubernetes label value whatever a GPU name or a version holds: at most 63
characters, ``[A-Za-z0-9]`` at both ends, ``-``, ``_`` and ``.`` inside (IsLabelValue,
kubernetes/apimachinery pkg/api/validate/content/kube.go, v0.35.7); a value that has nothing
left is not written. Values are redacted first: nothing secret reaches a node label.
"""

from __future__ import annotations

import datetime
import re
from collections import Counter
from typing import TYPE_CHECKING, Final, Optional

from envkit import __version__
from envkit.redact import redact

if TYPE_CHECKING:
    from envkit.report import Report

__all__ = ["LABEL_PREFIX", "feature_file", "label_value", "node_labels"]

LABEL_PREFIX: Final = "feature.node.kubernetes.io/envkit-"
VALUE_MAX: Final = 63
_OUTSIDE: Final = re.compile(r"[^A-Za-z0-9._-]+")
_ENDS: Final = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


def label_value(text: object) -> Optional[str]:
    """``text`` as a Kubernetes label value: runs of other characters become one ``-``, the ends
    are trimmed to a letter or digit, at most 63 characters; None when nothing is left.

    >>> label_value("NVIDIA H100 80GB HBM3"), label_value("2.5.1+cu121"), label_value("  ")
    ('NVIDIA-H100-80GB-HBM3', '2.5.1-cu121', None)
    """
    value = _ENDS.sub("", _OUTSIDE.sub("-", redact(str(text))))
    value = _ENDS.sub("", value[:VALUE_MAX])
    return value or None


def _one(values: list[str]) -> Optional[str]:
    """The value all share, "mixed" when they differ; None for none."""
    distinct = Counter(values)
    if not distinct:
        return None
    return next(iter(distinct)) if len(distinct) == 1 else "mixed"


def node_labels(report: Report, *, strict: bool = False) -> dict[str, str]:
    """The labels (full keys) and values of ``report``; a fact that is unknown has no label."""
    facts = report.facts
    code = report.exit_code(strict=strict)
    raw: dict[str, object] = {"version": __version__, "healthy": "true" if code == 0 else "false"}
    cause = report.cause
    if code != 0 and cause is not None:
        raw["cause"] = cause.id
    driver = facts.driver
    if driver.version is not None:
        raw["driver.version"] = driver.version
        raw["driver.branch"] = driver.version.release[0]
    if driver.cuda_version is not None:
        raw["driver.cuda"] = driver.cuda_version
        # CUDA's own integer (cudaDriverGetVersion: 1000 x major + 10 x minor): node affinity's Gt
        # and Lt compare integers only, so `driver.cuda-int Gt 12079` selects drivers for CUDA 12.8+.
        major, minor = (*driver.cuda_version.release, 0)[:2]
        raw["driver.cuda-int"] = 1000 * major + 10 * minor
    # NVIDIA's GPUs, and AMD's and Intel's (envkit.detect.amd / intel): (vendor, model, arch).
    gpus = [
        ("nvidia", g.name, g.compute_capability.sm if g.compute_capability is not None else None)
        for g in facts.gpus
    ]
    gpus += [(v.vendor, g.name, g.arch) for v in (facts.amd, facts.intel) for g in v.gpus]
    if gpus:
        raw["gpu.count"] = len(gpus)
        raw["gpu.vendor"] = _one([vendor for vendor, _, _ in gpus])
        raw["gpu.model"] = _one([name or "unknown" for _, name, _ in gpus])
        arches = sorted({arch for _, _, arch in gpus if arch})
        if arches:  # sm_90, gfx942, pvc: what a build's architecture list names
            raw["gpu.arch"] = "_".join(arches)
        caps = sorted({str(g.compute_capability) for g in facts.gpus if g.compute_capability is not None})
        if caps:
            raw["gpu.compute-capability"] = "_".join(caps)
    torch = facts.torch
    if torch.version is not None:
        raw["torch.version"] = torch.version.public
        raw["torch.variant"] = torch.variant or ""
        if torch.cuda is not None:
            raw["torch.cuda"] = torch.cuda
    python = facts.python
    if python is not None and python.version is not None:
        raw["python.version"] = f"{python.version.major}.{python.version.minor}"
    labels = {}
    for name, value in raw.items():
        text = label_value(value)
        if text is not None:
            labels[LABEL_PREFIX + name] = text
    return labels


def feature_file(report: Report, *, strict: bool = False, expires: Optional[datetime.datetime] = None) -> str:
    """The feature file: a header comment, the expiry directive (when given) and one label a line."""
    lines = [f"# envkit {__version__} preflight, {report.created}: labels for NFD's local source"]
    if expires is not None:
        stamp = expires.astimezone(datetime.timezone.utc).replace(microsecond=0)
        lines.append(f"# +expiry-time={stamp.isoformat().replace('+00:00', 'Z')}")
    lines += [f"{key}={value}" for key, value in sorted(node_labels(report, strict=strict).items())]
    return "\n".join(lines) + "\n"
