"""The cluster files in scripts/ checked as the tools that read them check them: every Kubernetes
manifest against the Kubernetes OpenAPI schema (kubernetes-validate, strict: an unknown field is an
error) for the oldest and newest release it bundles that we support; the node-problem-detector
plugin config against NPD's own rules; the Prometheus alert rules with promtool (check and unit
tests) where it is installed, else as YAML of the rule-file shape; the systemd units with
systemd-analyze where it is installed. Each also says what the files must do together (the paths
envkit writes are the paths the collectors read)."""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from envkit.commands.watch import parse_every
from envkit.render.npd import NPD_MAX_OUTPUT

ROOT = Path(__file__).resolve().parents[2]
K8S = sorted((ROOT / "scripts" / "k8s").glob("*.yaml"))
RULES = ROOT / "scripts" / "prometheus" / "envkit-alerts.yml"
RULES_TEST = ROOT / "scripts" / "prometheus" / "envkit-alerts-test.yml"
SYSTEMD = ROOT / "scripts" / "systemd"
# Kubernetes releases still in use (podFailurePolicy is on by default since 1.26) and the newest.
KUBERNETES = ("1.29.0", kubernetes_validate.latest_version())
FEATURES_D = "/etc/kubernetes/node-feature-discovery/features.d"


def documents(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d is not None]


def by_kind(path: Path, kind: str) -> dict[str, Any]:
    (found,) = [d for d in documents(path) if d["kind"] == kind]
    return found


@pytest.mark.parametrize("version", KUBERNETES)
@pytest.mark.parametrize("path", K8S, ids=lambda p: p.name)
def test_manifests_pass_the_kubernetes_schema(path: Path, version: str) -> None:
    for document in documents(path):
        kubernetes_validate.validate(document, version, strict=True)


def test_the_schema_check_catches_a_mistake() -> None:
    (job,) = documents(ROOT / "scripts" / "k8s" / "envkit-preflight-job.yaml")
    job["spec"]["template"]["spec"]["containers"][0]["resource"] = {}  # "resources" misspelled
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, KUBERNETES[0], strict=True)


def args_of(container: dict[str, Any]) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def option(args: list[str], name: str) -> str:
    for i, arg in enumerate(args):
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
        if arg == name:
            return args[i + 1]
    raise AssertionError(f"{name} not in {args}")


def host_path_of(pod: dict[str, Any], container: dict[str, Any], file: str) -> str:
    """The host path a file inside the container lands on (through its hostPath volume)."""
    for mount in container["volumeMounts"]:
        if file.startswith(mount["mountPath"].rstrip("/") + "/"):
            (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
            return volume["hostPath"]["path"].rstrip("/") + file[len(mount["mountPath"].rstrip("/")) :]
    raise AssertionError(f"{file} is on no volume")


def test_the_daemonset_watches_and_writes_where_the_collectors_read() -> None:
    daemonset = by_kind(ROOT / "scripts" / "k8s" / "envkit-daemonset.yaml", "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = args_of(container)
    assert args[:2] == ["envkit", "preflight"]
    interval, budget = parse_every(option(args, "--every")), float(option(args, "--timeout"))
    assert budget + 5 < interval  # a run (and its watchdog) ends well before the next is due
    assert "--verify" not in " ".join(args)  # the agent's runs stay cheap: no GPU kernels
    metrics = host_path_of(pod, container, option(args, "--metrics"))
    assert metrics == "/var/lib/node_exporter/textfile_collector/envkit.prom"
    assert metrics.endswith(".prom")  # node_exporter reads *.prom only
    assert host_path_of(pod, container, option(args, "--nfd-labels")) == f"{FEATURES_D}/envkit"
    # Sees the GPUs without taking any from the workloads.
    assert "nvidia.com/gpu" not in json.dumps(container.get("resources", {}))
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in container["env"]
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["shareProcessNamespace"] is True
    # The liveness probe's staleness bound is the file the watch writes, three intervals old.
    probe = " ".join(container["livenessProbe"]["exec"]["command"])
    assert option(args, "--metrics") in probe and str(int(3 * interval)) in probe


def npd_config() -> dict[str, Any]:
    config_map = by_kind(ROOT / "scripts" / "k8s" / "envkit-node-problem-detector.yaml", "ConfigMap")
    config: dict[str, Any] = json.loads(config_map["data"]["envkit-plugin-monitor.json"])
    return config


def go_duration(text: str) -> float:
    """Go's time.ParseDuration for the units NPD configs use."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    assert parts and "".join(n + u for n, u in parts) == text, text
    return sum(float(n) * units[u] for n, u in parts)


def test_the_npd_plugin_config_follows_npds_rules() -> None:
    # kubernetes/node-problem-detector@6632ca67 pkg/custompluginmonitor/types/config.go: a rule's
    # timeout may not exceed the global one; a permanent rule's condition must be one of the
    # conditions; max_output_length cuts the message.
    config = npd_config()
    assert config["plugin"] == "custom"
    global_timeout = go_duration(config["pluginConfig"]["timeout"])
    assert config["pluginConfig"]["max_output_length"] >= NPD_MAX_OUTPUT
    (condition,) = config["conditions"]
    assert condition["type"] == "EnvkitUnhealthy"
    (rule,) = config["rules"]
    assert rule["type"] == "permanent" and rule["condition"] == condition["type"]
    assert rule["args"][:2] == ["preflight", "--npd"]
    rule_timeout = go_duration(rule["timeout"])
    assert rule_timeout <= global_timeout
    # envkit answers (its watchdog included) before NPD kills it.
    budget = float(rule["args"][rule["args"].index("--timeout") + 1])
    assert budget + 5 < rule_timeout
    assert go_duration(config["pluginConfig"]["invoke_interval"]) > rule_timeout


def test_the_npd_daemonset_loads_the_plugin_config() -> None:
    path = ROOT / "scripts" / "k8s" / "envkit-node-problem-detector.yaml"
    config_map, daemonset = by_kind(path, "ConfigMap"), by_kind(path, "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    flag = next(a for a in container["command"] if a.startswith("--config.custom-plugin-monitor="))
    config_file = flag.split("=", 1)[1]
    (mount,) = [m for m in container["volumeMounts"] if config_file.startswith(m["mountPath"] + "/")]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert config_file.rsplit("/", 1)[1] in config_map["data"]


@pytest.mark.slow  # a real envkit process (~1 s)
def test_the_npd_plugin_really_answers_as_npd_expects(tmp_path: Path) -> None:
    # The configured arguments, run for real (this envkit, a machine with nothing to check): NPD's
    # exit-status contract and message limit.
    (rule,) = npd_config()["rules"]
    args = list(rule["args"])
    args[args.index("--timeout") + 1] = "20"
    proc = subprocess.run(
        [sys.executable, "-m", "envkit", *args, "--expect", str(ROOT / "tests" / "data" / "missing.toml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2  # could not check: NPD's Unknown
    (line,) = proc.stdout.splitlines()
    assert line.startswith("envkit: could not check: ") and len(line) <= NPD_MAX_OUTPUT and line.isascii()


# --- Prometheus ----------------------------------------------------------------------------------


def test_alert_rules_have_the_rule_file_shape() -> None:
    with RULES.open(encoding="utf-8") as fh:
        rules = yaml.safe_load(fh)
    (group,) = rules["groups"]
    assert group["name"] == "envkit"
    names = [r["alert"] for r in group["rules"]]
    assert len(names) == len(set(names))
    for rule in group["rules"]:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations", "keep_firing_for"}
        assert rule["labels"]["severity"] in ("critical", "warning")
        assert re.search(r"\benvkit_\w+", rule["expr"]), rule["expr"]
        assert rule["expr"].count("(") == rule["expr"].count(")")
        if "for" in rule:
            go_duration(rule["for"])
    # Every metric the rules name is one envkit writes (README "Metrics").
    from envkit.render.metrics import families

    written = {f.sample_name for f in _all_families(families)}
    for rule in group["rules"]:
        for name in re.findall(r"\benvkit_\w+", rule["expr"]):
            assert name in written, name


def _all_families(families: Any) -> list[Any]:
    """Every family envkit can write: a report with verify figures, a cause and a watch."""
    import dataclasses

    from envkit.commands.doctor import diagnose_file
    from envkit.render.metrics import WatchState
    from envkit.report import CheckResult, Status
    from tests.unit.render.test_metrics import DIST, H200_PERF

    report = diagnose_file(str(ROOT / "tests" / "data" / "reports" / "h200-580-torch2.11-cu130.json"))
    failing = CheckResult("gpu.health", Status.FAIL, "GPU 3 is lost")
    report = dataclasses.replace(report, checks=(*report.checks, H200_PERF, DIST, failing), duration_s=1.0)
    found: list[Any] = families(report, watch=WatchState(1, 0, 300.0))
    return found


PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)")
def test_promtool_checks_and_unit_tests_the_rules() -> None:
    assert PROMTOOL is not None
    for argv in ([PROMTOOL, "check", "rules", RULES.name], [PROMTOOL, "test", "rules", RULES_TEST.name]):
        proc = subprocess.run(argv, cwd=RULES.parent, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "SUCCESS" in proc.stdout


# --- systemd -------------------------------------------------------------------------------------


def systemd_span(text: str) -> float:
    """systemd.time(7): "70" (seconds), "5min", "1min 30s"."""
    units = {"us": 1e-6, "ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400}
    if re.fullmatch(r"\d+(?:\.\d+)?", text.strip()):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]+)", text)
    assert parts and all(u in units for _, u in parts), text
    return sum(float(n) * units[u] for n, u in parts)


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=True, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((SYSTEMD / name).read_text(encoding="utf-8").replace("\\\n", " "))
    return parser


def test_the_timer_starts_the_service_and_the_service_writes_the_files() -> None:
    service, timer = unit("envkit-preflight.service"), unit("envkit-preflight.timer")
    assert service["Service"]["Type"] == "oneshot"
    exec_start = service["Service"]["ExecStart"].split()
    assert exec_start[1] == "preflight"
    assert "--every" not in exec_start  # the timer repeats it
    assert option(exec_start, "--metrics").endswith(".prom")
    assert option(exec_start, "--nfd-labels") == f"{FEATURES_D}/envkit"
    # systemd gives up after TimeoutStartSec: after envkit's budget and its watchdog's 5 s.
    assert float(option(exec_start, "--timeout")) + 5 < systemd_span(service["Service"]["TimeoutStartSec"])
    assert service["Service"]["SuccessExitStatus"] == "1"  # unhealthy is a verdict, not a failure
    assert systemd_span(timer["Timer"]["OnUnitActiveSec"]) > systemd_span(
        service["Service"]["TimeoutStartSec"]
    )
    assert timer["Install"]["WantedBy"] == "timers.target"


def read_only_for(service: configparser.SectionProxy, path: str) -> bool:
    """Whether ``path`` is read-only for the service: ProtectSystem= mounts /usr, /boot and /efi
    read-only (yes), /etc too (full), or everything but /dev, /proc and /sys (strict); a
    ReadWritePaths= entry ("-" first: ignored where missing) makes its tree writable again
    (systemd.exec(5), "Sandboxing")."""
    protect = service.get("ProtectSystem", "no")
    roots = {"yes": ["/usr", "/boot", "/efi"], "true": ["/usr", "/boot", "/efi"]}.get(protect, [])
    roots = [*roots, "/etc"] if protect == "full" else ["/"] if protect == "strict" else roots
    writable = [p.lstrip("-+") for p in service.get("ReadWritePaths", "").split()]

    def under(tree: str) -> bool:
        return tree == "/" or path == tree or path.startswith(tree.rstrip("/") + "/")

    return any(under(root) for root in roots) and not any(under(tree) for tree in writable)


def test_the_service_may_write_where_envkit_writes() -> None:
    # ProtectSystem=full made /etc read-only, and with it NFD's features.d: every run was exit 2
    # ("cannot write in /etc/kubernetes/node-feature-discovery/features.d (read-only or not
    # yours)", as a read-only bind mount of /etc shows) and no label was ever written.
    service = unit("envkit-preflight.service")["Service"]
    exec_start = service["ExecStart"].split()
    folders = [os.path.dirname(option(exec_start, name)) for name in ("--metrics", "--nfd-labels")]
    cache = service["Environment"].split("=", 1)[1]
    for folder in [*folders, cache]:
        assert not read_only_for(service, folder), folder
    assert read_only_for(service, "/etc/passwd")  # the sandbox is still there


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verifies_the_units(tmp_path: Path) -> None:
    # verify wants ExecStart's program to exist: this checkout's envkit stands in for /opt/envkit.
    envkit = shutil.which("envkit") or str(Path(sys.executable).parent / "envkit")
    for name in ("envkit-preflight.service", "envkit-preflight.timer"):
        text = (SYSTEMD / name).read_text(encoding="utf-8").replace("/opt/envkit/bin/envkit", envkit)
        (tmp_path / name).write_text(text, encoding="utf-8")
    proc = subprocess.run(
        [
            "systemd-analyze",
            "verify",
            "--man=no",
            str(tmp_path / "envkit-preflight.service"),
            str(tmp_path / "envkit-preflight.timer"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def readme_queries() -> list[str]:
    """The Grafana queries of scripts/README.md's table (the second column's code)."""
    text = (ROOT / "scripts" / "README.md").read_text(encoding="utf-8")
    table = text.split("Queries for Grafana panels", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| [^|]+ \| `([^`]+)`", table, re.M)]


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)")
def test_the_readmes_queries_are_promql(tmp_path: Path) -> None:
    # promtool parses each expression of a rule file: the queries, as recording rules.
    queries = readme_queries()
    assert len(queries) >= 10
    rules = {
        "groups": [{"name": "q", "rules": [{"record": f"q{i}", "expr": q} for i, q in enumerate(queries)]}]
    }
    (tmp_path / "queries.yml").write_text(yaml.safe_dump(rules), encoding="utf-8")
    assert PROMTOOL is not None
    proc = subprocess.run(
        [PROMTOOL, "check", "rules", "queries.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
