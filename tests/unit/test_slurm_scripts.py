"""The cluster hooks in scripts/: the Slurm scripts run for real (bash) against stand-in ``scontrol``,
``envkit`` and ``logger`` programs on PATH that record how they were called; the Kubernetes examples
parse and carry the fields that make them safe (deadlines, GPU limits, restart policy)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from tests.conftest import check_property, examples

ROOT = Path(__file__).resolve().parents[2]
HEALTHCHECK = ROOT / "scripts" / "slurm" / "envkit-healthcheck.sh"
PROLOG = ROOT / "scripts" / "slurm" / "envkit-prolog.sh"
JOB_YAML = ROOT / "scripts" / "k8s" / "envkit-preflight-job.yaml"
INIT_YAML = ROOT / "scripts" / "k8s" / "envkit-init-container.yaml"
NODE = "gpu-a01"
STAMP = "[root@2026-11-29T10:00:00]"
# Arguments and calls in the record files: fields end with US (0x1f), calls with RS (0x1e).
US, RS = "\x1f", "\x1e"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="Slurm hooks are bash scripts")


def show_node(state: str, reason: str | None) -> str:
    """``scontrol show node`` as Slurm 24.05 prints it for a GPU node.

    The layout (field order, three-space continuation indent, the blank line before ``Reason=``,
    and the `` [user@time]`` scontrol appends to the reason) follows a real node's output posted in
    https://github.com/awslabs/awsome-distributed-ai/issues/195 (comment of 2024-12-19, Slurm
    24.05.0, ``State=IDLE+DRAIN Reason=gres/gpu count reported lower than configured (0 < 1)
    [slurm@2024-12-19T11:03:34]``); the names and numbers here are ours.
    """
    lines = [
        f"NodeName={NODE} Arch=x86_64 CoresPerSocket=48 ",
        "   CPUAlloc=0 CPUEfctv=192 CPUTot=192 CPULoad=0.31",
        "   AvailableFeatures=h200,nvlink",
        "   ActiveFeatures=h200,nvlink",
        "   Gres=gpu:nvidia_h200:8(S:0-1)",
        f"   NodeAddr={NODE} NodeHostName={NODE} Version=24.05.4",
        "   OS=Linux 5.15.0-126-generic #136-Ubuntu SMP Wed Nov 6 10:38:22 UTC 2024 ",
        "   RealMemory=2063937 AllocMem=0 FreeMem=2001733 Sockets=2 Boards=1",
        f"   State={state} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
        "   Partitions=gpu ",
        "   BootTime=2026-11-20T08:12:40 SlurmdStartTime=2026-11-20T08:14:02",
        "   LastBusyTime=2026-11-29T09:58:11 ResumeAfterTime=None",
        "   CfgTRES=cpu=192,mem=2063937M,billing=192,gres/gpu=8",
        "   AllocTRES=",
        "   CurrentWatts=0 AveWatts=0",
        "   ",
    ]
    if reason is not None:
        lines.append(f"   Reason={reason} {STAMP}")
    return "\n".join(lines) + "\n"


def records(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    text = path.read_bytes().decode("utf-8", errors="replace")
    return [call.split(US)[:-1] for call in text.split(RS)[:-1]]


def executable(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)


@dataclass
class Outcome:
    rc: int
    stderr: str
    elapsed: float
    scontrol: list[list[str]]
    logs: list[list[str]]

    @property
    def updates(self) -> list[list[str]]:
        return [call for call in self.scontrol if call[:1] == ["update"]]

    @property
    def reasons(self) -> list[str]:
        return [
            arg.removeprefix("Reason=") for call in self.updates for arg in call if arg.startswith("Reason=")
        ]

    @property
    def log_text(self) -> str:
        return "\n".join(" ".join(call) for call in self.logs) + self.stderr


class Node:
    """A fake Slurm node: a bin folder on PATH with recording stand-ins for scontrol, envkit, logger."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.bin = base / "bin"
        self.bin.mkdir(parents=True)
        self.show = base / "show-node.txt"
        self.scontrol_calls = base / "scontrol.calls"
        self.logger_calls = base / "logger.calls"
        self.envkit_args = base / "envkit.args"
        self.envkit_env = base / "envkit.env"
        self.envkit_pid = base / "envkit.pid"
        executable(
            self.bin / "scontrol",
            "#!/bin/sh\n"
            f"printf '%s\\037' \"$@\" >> '{self.scontrol_calls}'\n"
            f"printf '\\036' >> '{self.scontrol_calls}'\n"
            'if [ "$1" = show ]; then\n'
            '  if [ -n "${STANDIN_SHOW_SLEEP:-}" ]; then exec sleep "$STANDIN_SHOW_SLEEP"; fi\n'
            f"  if [ -f '{self.show}' ]; then cat '{self.show}'; exit 0; fi\n"
            '  echo "Node $3 not found" >&2; exit 1\n'
            "fi\n"
            'exit "${STANDIN_UPDATE_RC:-0}"\n',
        )
        executable(
            self.bin / "logger",
            f"#!/bin/sh\nprintf '%s\\037' \"$@\" >> '{self.logger_calls}'\nprintf '\\036' >> '{self.logger_calls}'\n",
        )
        self.envkit()
        self.env: dict[str, str] = {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "HOME": str(base),
            "TMPDIR": str(base),
            "SLURMD_NODENAME": NODE,
            # Never read the machine's own configuration.
            "ENVKIT_HEALTHCHECK_CONF": str(base / "no-such.conf"),
            "ENVKIT_PROLOG_CONF": str(base / "no-such.conf"),
        }

    def state(self, state: str, reason: str | None = None) -> None:
        self.show.write_text(show_node(state, reason), encoding="utf-8")

    def envkit(self, rc: int = 0, stderr: str = "", *, stdout: str = "", sleep: float = 0) -> None:
        """The stand-in ``envkit``: records its arguments and environment, prints, sleeps, exits."""
        (self.base / "envkit.stderr").write_text(stderr, encoding="utf-8", errors="surrogateescape")
        (self.base / "envkit.stdout").write_text(stdout, encoding="utf-8")
        tail = f"exec sleep {sleep}\n" if sleep else f"exit {rc}\n"
        executable(
            self.bin / "envkit",
            "#!/bin/sh\n"
            f"printf '%s\\037' \"$@\" > '{self.envkit_args}'\n"
            f"env > '{self.envkit_env}'\n"
            f"echo $$ > '{self.envkit_pid}'\n"
            f"cat '{self.base / 'envkit.stdout'}'\n"
            f"cat '{self.base / 'envkit.stderr'}' >&2\n" + tail,
        )

    def run(self, script: Path = HEALTHCHECK, **env: str) -> Outcome:
        for path in (self.scontrol_calls, self.logger_calls):
            path.unlink(missing_ok=True)
        start = time.monotonic()
        proc = subprocess.run(
            ["bash", str(script)],
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return Outcome(
            rc=proc.returncode,
            stderr=proc.stderr,
            elapsed=time.monotonic() - start,
            scontrol=records(self.scontrol_calls),
            logs=records(self.logger_calls),
        )

    def envkit_argv(self) -> list[str]:
        return records_one(self.envkit_args)

    def envkit_environ(self) -> dict[str, str]:
        lines = self.envkit_env.read_text(encoding="utf-8").splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)


def records_one(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split(US)[:-1]


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def drain(reason: str) -> list[str]:
    return ["update", f"NodeName={NODE}", "State=DRAIN", f"Reason={reason}"]


RESUME = ["update", f"NodeName={NODE}", "State=RESUME"]
GPU_REASON = "envkit: gpu.count: 7 of 8 expected GPUs visible to NVML"


# --- healthy ----------------------------------------------------------------------------------------


def test_healthy_node_in_service_is_left_alone(node: Node) -> None:
    node.state("IDLE")
    out = node.run()
    assert out.rc == 0
    assert out.scontrol == [["show", "node", NODE]]
    assert node.envkit_argv() == ["preflight", "--timeout", "30"]
    assert "action=none" in out.log_text


@pytest.mark.parametrize("state", ["IDLE+DRAIN", "MIXED+DRAIN", "DOWN+DRAIN", "DOWN*+DRAIN", "DOWN"])
def test_healthy_node_drained_by_envkit_is_resumed(node: Node, state: str) -> None:
    node.state(state, GPU_REASON)
    out = node.run()
    assert out.rc == 0
    assert out.updates == [RESUME]
    assert "action=resume" in out.log_text


@pytest.mark.parametrize(
    "reason",
    [
        "bad fan",  # an admin's note
        "NHC: check_hw_ib: No IB port mlx5_0:1 is ACTIVE (LinkUp 4X NDR)",  # NHC's drain
        "Kill task failed",  # Slurm's own
        "replace GPU 3; envkit: said so",  # mentions envkit, but not envkit's drain
    ],
)
def test_healthy_node_drained_by_someone_else_stays_drained(node: Node, reason: str) -> None:
    node.state("IDLE+DRAIN", reason)
    out = node.run()
    assert out.rc == 0
    assert out.updates == []
    assert "someone else" in out.log_text


def test_healthy_node_with_a_stale_envkit_reason_but_in_service_is_left_alone(node: Node) -> None:
    node.state("IDLE", GPU_REASON)
    assert node.run().updates == []


def test_healthy_but_node_state_unreadable_resumes_nothing(node: Node) -> None:
    # No canned output: the stand-in answers "Node gpu-a01 not found" and exits 1.
    out = node.run()
    assert out.rc == 3
    assert out.updates == []


# --- unhealthy --------------------------------------------------------------------------------------


def test_unhealthy_node_is_drained_with_envkits_reason(node: Node) -> None:
    node.state("IDLE")
    node.envkit(1, f"warning: something unrelated\n{GPU_REASON}\n")
    out = node.run()
    assert out.rc == 1
    assert out.updates == [drain(GPU_REASON)]
    assert f"action=drain reason={GPU_REASON}" in out.log_text
    # Syslog, tag envkit, a warning: what a site's log shipper keys on.
    assert out.logs[-1][:4] == ["-t", "envkit", "-p", "daemon.warning"]


@pytest.mark.parametrize("reason", ["bad fan", "NHC: check_fs_mount: /scratch not mounted"])
def test_unhealthy_node_drained_by_someone_else_keeps_their_reason(node: Node, reason: str) -> None:
    node.state("IDLE+DRAIN", reason)
    node.envkit(1, GPU_REASON + "\n")
    out = node.run()
    assert out.rc == 1
    assert out.updates == []
    assert f"reason kept: {reason}" in out.log_text
    assert GPU_REASON in out.log_text  # what envkit found is still logged


def test_unhealthy_node_already_drained_by_envkit_for_the_same_reason_is_not_updated(node: Node) -> None:
    node.state("IDLE+DRAIN", GPU_REASON)
    node.envkit(1, GPU_REASON + "\n")
    out = node.run()
    assert out.rc == 1
    assert out.updates == []
    assert "already drained by envkit for this reason" in out.log_text


def test_unhealthy_node_drained_by_envkit_for_another_reason_gets_the_new_one(node: Node) -> None:
    node.state("DRAINED", "envkit: driver.version: 535.54.03 is below the 550 floor")
    node.envkit(1, GPU_REASON + "\n")
    assert node.run().updates == [drain(GPU_REASON)]


def test_unhealthy_node_whose_state_cannot_be_read_is_drained_anyway(node: Node) -> None:
    node.envkit(1, GPU_REASON + "\n")
    out = node.run()
    assert out.updates == [drain(GPU_REASON)]
    assert "draining anyway" in out.log_text


def test_a_failed_drain_is_reported(node: Node) -> None:
    node.state("IDLE")
    node.envkit(1, GPU_REASON + "\n")
    out = node.run(STANDIN_UPDATE_RC="1")
    assert out.rc == 3
    assert "FAILED" in out.log_text


# --- the drain reason -------------------------------------------------------------------------------


def assert_fit_for_slurm(reason: str, limit: int = 100) -> None:
    assert reason.startswith("envkit:")
    assert len(reason) <= limit
    assert reason.isascii()
    assert reason.isprintable()
    assert not set(reason) & set("\"'`\\[]")
    assert reason == " ".join(reason.split())  # no runs of blanks, nothing at either end


def test_reason_quotes_backslashes_and_control_characters_are_removed(node: Node) -> None:
    node.state("IDLE")
    node.envkit(
        1, 'progress: checking\nenvkit: gpu.count:\texpected "8" GPUs, found `7`; it\'s \\bad\\ [x@y]\r\n'
    )
    out = node.run()
    (reason,) = out.reasons
    assert reason == "envkit: gpu.count: expected 8 GPUs, found 7; its bad (x@y)"
    assert_fit_for_slurm(reason)


def test_a_very_long_reason_is_cut_to_100_characters(node: Node) -> None:
    node.state("IDLE")
    node.envkit(1, "envkit: gpu.ecc: " + "uncorrectable error on GPU 3 " * 20 + "\n")
    (reason,) = node.run().reasons
    assert len(reason) == 100
    assert reason.startswith("envkit: gpu.ecc: uncorrectable error on GPU 3")
    assert reason.endswith("...")
    assert_fit_for_slurm(reason)


def test_the_length_limit_is_configurable(node: Node) -> None:
    node.state("IDLE")
    node.envkit(1, "envkit: gpu.ecc: " + "x" * 200 + "\n")
    (reason,) = node.run(ENVKIT_REASON_MAX="60").reasons
    assert len(reason) == 60


def test_envkits_own_symbols_are_spelled_in_ascii(node: Node) -> None:
    # envkit's drain_reason ends a cut summary with "…"; its summaries use ≥ and ×.
    node.state("IDLE")
    node.envkit(1, "envkit: nccl.busbw: 301 GB/s, below 0.8 × 431 GB/s (need ≥ 345) ✗ (+2 more)…\n")
    (reason,) = node.run().reasons
    assert reason == "envkit: nccl.busbw: 301 GB/s, below 0.8 x 431 GB/s (need >= 345) ? (+2 more)..."
    assert_fit_for_slurm(reason)


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        ("Segmentation fault (core dumped)\n", "envkit: Segmentation fault (core dumped)"),
        ("", "envkit: preflight: unhealthy (no reason given)"),
        ("\n  \n", "envkit: preflight: unhealthy (no reason given)"),
    ],
)
def test_a_reason_is_made_when_envkit_gives_none(node: Node, stderr: str, expected: str) -> None:
    node.state("IDLE")
    node.envkit(1, stderr)
    assert node.run().reasons == [expected]


@examples(6, 25)  # each example runs the script (~0.15 s)
def test_any_stderr_becomes_a_reason_fit_for_slurm(max_examples: int) -> None:
    text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)
    check_property(max_examples, _stderr_becomes_a_reason, text)


def _stderr_becomes_a_reason(stderr: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        node = Node(Path(folder))
        node.state("IDLE")
        node.envkit(1, stderr)
        out = node.run()
    assert out.rc == 1
    (reason,) = out.reasons
    assert_fit_for_slurm(reason)


# --- no verdict: exit 2, 70, timeouts ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("rc", "message"),
    [
        (2, "envkit: /etc/envkit/node.toml: line 3: unknown key 'gpu_cuont'"),
        (70, "envkit: internal error: KeyError: 'gpus'"),
        (127, "bash: envkit: command not found"),
    ],
)
def test_no_verdict_is_ignored_by_default(node: Node, rc: int, message: str) -> None:
    node.state("IDLE")
    node.envkit(rc, message + "\n  hint: see envkit preflight --help\n")
    out = node.run()
    assert out.rc == 2
    assert out.updates == []
    assert "policy=ignore" in out.log_text
    assert f"exit {rc}" in out.log_text


def test_no_verdict_never_resumes_a_node_envkit_drained(node: Node) -> None:
    node.state("IDLE+DRAIN", GPU_REASON)
    node.envkit(2, "envkit: --expect: no such file /etc/envkit/node.toml\n")
    assert node.run().updates == []


def test_no_verdict_drains_when_the_site_says_so(node: Node) -> None:
    node.state("IDLE")
    node.envkit(2, "envkit: /etc/envkit/node.toml: line 3: unknown key 'gpu_cuont'\n")
    out = node.run(ENVKIT_ON_ERROR="drain")
    assert out.rc == 2
    (reason,) = out.reasons
    assert reason.startswith("envkit: preflight: could not check (exit 2): /etc/envkit/node.toml")
    assert_fit_for_slurm(reason)


def test_no_verdict_still_respects_someone_elses_drain(node: Node) -> None:
    node.state("IDLE+DRAIN", "bad fan")
    node.envkit(70, "envkit: internal error: KeyError: 'gpus'\n")
    assert node.run(ENVKIT_ON_ERROR="drain").updates == []


def test_an_unknown_policy_falls_back_to_ignore(node: Node) -> None:
    node.state("IDLE")
    node.envkit(2, "envkit: bad\n")
    out = node.run(ENVKIT_ON_ERROR="yes-please")
    assert out.updates == []
    assert "neither drain nor ignore" in out.log_text


FAST = {"ENVKIT_TIMEOUT": "1", "ENVKIT_GRACE": "1", "ENVKIT_KILL_AFTER": "1"}


def test_a_hung_envkit_is_killed_in_time_and_the_node_drained(node: Node) -> None:
    node.state("IDLE")
    node.envkit(sleep=60)
    out = node.run(**FAST)
    # timeout 1 + grace 1 (SIGTERM), then the stand-in is gone; far from the 60 s it asked for.
    assert out.elapsed < 8
    assert out.rc == 2
    (reason,) = out.reasons
    assert reason == "envkit: preflight: no answer within 2s (timed out)"
    # The stand-in was killed, not left behind: its pid (exec'd sleep, reaped by timeout) is gone.
    pid = int(node.envkit_pid.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.slow  # a 2 s hang; test_a_hung_envkit_is_killed_in_time_and_the_node_drained is the fast one
def test_a_hung_envkit_is_ignored_when_the_site_says_so(node: Node) -> None:
    node.state("IDLE")
    node.envkit(sleep=60)
    out = node.run(ENVKIT_ON_TIMEOUT="ignore", **FAST)
    assert out.elapsed < 8
    assert out.updates == []
    assert "policy=ignore" in out.log_text


@pytest.mark.slow  # a 2 s hang
def test_a_timeout_uses_the_watchdogs_line_when_envkit_printed_one(node: Node) -> None:
    node.state("IDLE")
    node.envkit(stderr="envkit: preflight: no answer within 6 s (watchdog)\n", sleep=60)
    (reason,) = node.run(**FAST).reasons
    assert reason == "envkit: preflight: no answer within 6 s (watchdog)"


@pytest.mark.slow  # ~4 s: the script's own deadline
def test_envkit_stuck_beyond_sigkill_does_not_hold_the_script(node: Node) -> None:
    # A process in uninterruptible sleep (a wedged GPU driver) survives SIGKILL, and `timeout`
    # then waits for it forever. Stand in for that with a `timeout` that ignores everything for
    # preflight; the script must stop waiting at its own deadline and still decide.
    pid_file = node.base / "stuck.pid"
    executable(
        node.bin / "timeout",
        "#!/bin/bash\n"
        'case "$1" in\n'  # only envkit's run has --kill-after; scontrol's and logger's pass through
        f"  --kill-after=*) echo $$ > '{pid_file}'; trap '' TERM INT; exec sleep 12 ;;\n"
        f'  *) exec {shutil.which("timeout")} "$@" ;;\n'
        "esac\n",
    )
    node.state("IDLE")
    try:
        out = node.run(**FAST)
    finally:
        if pid_file.exists():  # our own stand-in: stop it
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert out.elapsed < 9  # budget 2 + kill-after 1 + 2 s of patience, plus scontrol
    (reason,) = out.reasons
    assert "stuck in the kernel" in reason
    assert_fit_for_slurm(reason)


def test_a_hung_scontrol_is_bounded(node: Node) -> None:
    node.envkit(1, GPU_REASON + "\n")
    out = node.run(STANDIN_SHOW_SLEEP="30", SCONTROL_TIMEOUT="1")
    assert out.elapsed < 8
    assert out.updates == [drain(GPU_REASON)]  # unreadable state: drained anyway


# --- configuration ----------------------------------------------------------------------------------


def test_envkit_args_and_timeout_come_from_the_config_file(node: Node) -> None:
    conf = node.base / "healthcheck.conf"
    conf.write_text('ENVKIT_ARGS="--expect /etc/envkit/node.toml --strict"\nENVKIT_TIMEOUT=20\n')
    node.state("IDLE")
    node.run(ENVKIT_HEALTHCHECK_CONF=str(conf))
    assert node.envkit_argv() == [
        "preflight",
        "--timeout",
        "20",
        "--expect",
        "/etc/envkit/node.toml",
        "--strict",
    ]


def test_the_node_name_falls_back_to_hostname(node: Node) -> None:
    executable(node.bin / "hostname", '#!/bin/sh\n[ "$1" = -s ] && echo gpu-b07\n')
    env = dict(node.env)
    del env["SLURMD_NODENAME"]
    node.env = env
    node.state("IDLE")
    assert node.run().scontrol[0] == ["show", "node", "gpu-b07"]


def test_the_report_is_kept_whole_when_asked(node: Node) -> None:
    report = node.base / "preflight.json"
    node.state("IDLE")
    node.envkit(1, GPU_REASON + "\n", stdout='{"schema": "envkit.report/1"}\n')
    node.run(ENVKIT_REPORT=str(report))
    assert node.envkit_argv()[-1] == "--json"
    assert report.read_text() == '{"schema": "envkit.report/1"}\n'
    assert sorted(p.name for p in node.base.glob("preflight.json*")) == ["preflight.json"]


def test_the_metrics_file_is_passed_to_envkit(node: Node) -> None:
    metrics = node.base / "textfile" / "envkit.prom"
    node.state("IDLE")
    node.run(ENVKIT_METRICS=str(metrics), ENVKIT_ARGS="--expect /etc/envkit/node.toml")
    assert node.envkit_argv() == [
        "preflight",
        "--timeout",
        "30",
        "--expect",
        "/etc/envkit/node.toml",
        "--metrics",
        str(metrics),
    ]


def real_envkit(node: Node) -> None:
    """``envkit`` on the node's PATH is the real one (this checkout, the test interpreter)."""
    executable(node.bin / "envkit", f'#!/bin/sh\nexec "{sys.executable}" -m envkit "$@"\n')


@pytest.mark.slow  # two real envkit runs (~1 s each)
def test_the_real_envkit_writes_metrics_and_drains_and_resumes_as_nhc_does(node: Node) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from envkit.checks import CHECKS

    real_envkit(node)
    metrics = node.base / "textfile" / "envkit.prom"
    impossible = node.base / "impossible.toml"
    impossible.write_text("gpu_count = 4096\n", encoding="utf-8")
    ignored = node.base / "ignored.toml"
    ignored.write_text(f"ignore = {json.dumps(sorted(CHECKS))}\n", encoding="utf-8")

    def healthy() -> float:
        for family in text_string_to_metric_families(metrics.read_text(encoding="utf-8")):
            if family.name == "envkit_healthy":
                return float(family.samples[0].value)
        raise AssertionError("no envkit_healthy")

    node.state("IDLE")
    out = node.run(ENVKIT_METRICS=str(metrics), ENVKIT_ARGS=f"--expect {impossible}")
    assert out.rc == 1, out.stderr
    (reason,) = out.reasons
    assert reason == "envkit: expect.gpu_count: expected 4096, found 0"
    assert healthy() == 0.0
    # Drained by envkit: the next healthy run resumes it (NHC's rule: only its own drains).
    node.state("IDLE+DRAIN", reason)
    out = node.run(ENVKIT_METRICS=str(metrics), ENVKIT_ARGS=f"--expect {ignored}")
    assert out.rc == 0, out.stderr
    assert out.updates == [RESUME]
    assert healthy() == 1.0
    # Drained by someone else: healthy or not, it stays drained.
    node.state("IDLE+DRAIN", "bad fan")
    assert node.run(ENVKIT_METRICS=str(metrics), ENVKIT_ARGS=f"--expect {ignored}").updates == []


def test_a_budget_slurm_would_cut_short_is_warned_about(node: Node) -> None:
    node.state("IDLE")
    out = node.run(ENVKIT_TIMEOUT="55")
    assert "slurmd kills a HealthCheckProgram at 60 s" in out.log_text


def test_bad_numbers_fall_back_to_the_defaults(node: Node) -> None:
    node.state("IDLE")
    out = node.run(ENVKIT_TIMEOUT="thirty")
    assert node.envkit_argv() == ["preflight", "--timeout", "30"]
    assert "ENVKIT_TIMEOUT=thirty" in out.log_text


def test_a_dry_run_decides_but_changes_nothing(node: Node) -> None:
    node.state("IDLE")
    node.envkit(1, GPU_REASON + "\n")
    out = node.run(ENVKIT_DRY_RUN="1")
    assert out.rc == 1
    assert out.updates == []
    assert (
        f"dry run, not running: scontrol update NodeName={NODE} State=DRAIN Reason={GPU_REASON}"
        in out.log_text
    )


def test_without_a_logger_decisions_go_to_stderr(node: Node) -> None:
    node.state("IDLE+DRAIN", GPU_REASON)
    out = node.run(ENVKIT_LOGGER="")
    assert out.logs == []
    assert "envkit-healthcheck: node=gpu-a01 healthy action=resume" in out.stderr


# --- the Prolog -------------------------------------------------------------------------------------


def test_prolog_passes_a_healthy_node(node: Node) -> None:
    out = node.run(PROLOG)
    assert out.rc == 0
    assert out.scontrol == []  # Slurm drains on a failed Prolog; the Prolog itself never does
    assert node.envkit_argv() == ["preflight", "--timeout", "5", "--verify", "device"]


def test_prolog_fails_an_unhealthy_node_and_says_why(node: Node) -> None:
    node.envkit(1, "envkit: verify.device: CUDA error: uncorrectable ECC error encountered\n")
    out = node.run(PROLOG, SLURM_JOB_ID="4242")
    assert out.rc == 1
    assert "job=4242 node=gpu-a01 prolog: unhealthy: envkit: verify.device: CUDA error" in out.stderr
    assert out.logs[-1][:4] == ["-t", "envkit", "-p", "daemon.warning"]


def test_prolog_lets_the_job_run_when_envkit_cannot_check(node: Node) -> None:
    node.envkit(2, "envkit: --expect: no such file /etc/envkit/node.toml\n")
    out = node.run(PROLOG)
    assert out.rc == 0
    assert "policy=ignore" in out.stderr


@pytest.mark.slow  # a 2 s hang, the prolog's copy of the healthcheck's timeout path
def test_prolog_fails_on_a_hang(node: Node) -> None:
    node.envkit(sleep=60)
    out = node.run(PROLOG, ENVKIT_TIMEOUT="1", ENVKIT_GRACE="1")
    assert out.rc == 1
    assert out.elapsed < 8
    assert "no answer within 2s" in out.stderr


def test_prolog_checks_only_the_jobs_gpus(node: Node) -> None:
    node.run(PROLOG, SLURM_JOB_GPUS="2,3")
    env = node.envkit_environ()
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


# --- the scripts themselves -------------------------------------------------------------------------


@pytest.mark.parametrize("script", [HEALTHCHECK, PROLOG], ids=lambda p: p.name)
def test_script_is_executable_bash(script: Path) -> None:
    assert script.read_text(encoding="utf-8").startswith("#!/usr/bin/env bash\n")
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_shellcheck_is_clean() -> None:
    proc = subprocess.run(
        ["shellcheck", str(HEALTHCHECK), str(PROLOG)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout


# --- Kubernetes -------------------------------------------------------------------------------------

_DUMP = "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))"


def load_yaml(path: Path) -> list[Any]:
    """Every document in ``path``: with PyYAML if installed here, else with a system Python's."""
    try:
        import yaml
    except ImportError:
        pass
    else:
        with path.open(encoding="utf-8") as fh:
            return list(yaml.safe_load_all(fh))
    import json

    for python in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if Path(python).exists() and Path(python).resolve() != Path(sys.executable).resolve():
            proc = subprocess.run(
                [python, "-c", _DUMP, str(path)], capture_output=True, text=True, check=False
            )
            if proc.returncode == 0:
                documents: list[Any] = json.loads(proc.stdout)
                return documents
    pytest.skip("PyYAML is not installed (neither here nor in a system Python)")


def envkit_command(container: dict[str, Any]) -> str:
    return " ".join([*container.get("command", []), *container.get("args", [])])


def test_job_yaml_is_a_bounded_job_on_one_gpu_node_class() -> None:
    (job,) = load_yaml(JOB_YAML)
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    spec = job["spec"]
    deadline = spec["activeDeadlineSeconds"]
    assert isinstance(deadline, int)
    assert deadline > 0
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["nodeSelector"]  # the node class
    (container,) = pod["containers"]
    assert int(container["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    command = envkit_command(container)
    assert "envkit preflight" in command
    assert "--json" in command
    budget = int(command.split("--timeout", 1)[1].split()[0])
    assert budget < deadline  # envkit answers before Kubernetes kills it
    # An unhealthy verdict is final: exit 1 fails the Job instead of being retried.
    rules = spec["podFailurePolicy"]["rules"]
    assert {
        "action": "FailJob",
        "onExitCodes": {"containerName": "envkit", "operator": "In", "values": [1]},
    } in rules
    # The expectations file the command names is mounted.
    (mount,) = container["volumeMounts"]
    assert "--expect " + mount["mountPath"] in command
    assert {v["name"] for v in pod["volumes"]} == {mount["name"]}


def test_init_container_yaml_gates_the_main_container_with_a_marker() -> None:
    (deployment,) = load_yaml(INIT_YAML)
    assert deployment["kind"] == "Deployment"
    pod = deployment["spec"]["template"]["spec"]
    # On a long-running pod a deadline would kill the workload too.
    assert "activeDeadlineSeconds" not in pod
    (init,) = pod["initContainers"]
    (main,) = pod["containers"]
    command = envkit_command(init)
    assert "envkit preflight" in command
    assert "--timeout" in command
    # The marker is written only after envkit succeeded, and the main container waits on it.
    marker = "/run/envkit/preflight-ready"
    assert command.index("envkit preflight") < command.index("&&") < command.index(f"touch {marker}")
    assert main["readinessProbe"]["exec"]["command"] == ["test", "-f", marker]
    # Both see the same volume at the marker's folder; the GPUs checked are the GPUs used.
    assert {m["name"] for m in init["volumeMounts"]} == {m["name"] for m in main["volumeMounts"]}
    assert all(m["mountPath"] == "/run/envkit" for m in [*init["volumeMounts"], *main["volumeMounts"]])
    gpus = "nvidia.com/gpu"
    assert init["resources"]["limits"][gpus] == main["resources"]["limits"][gpus]
