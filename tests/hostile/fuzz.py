"""The fuzzed files of the hostile harness (tests/hostile/harness.py): whatever a file a user names
holds, envkit answers with exit 0, 1, 2 or 3, and on 2 with one line (and an optional hint), never
an internal error (70) or a traceback.

The inputs are real files, built by hypothesis from real ones (a recorded report, collect_env's own
labels, the expectation keys, the template fields, conda and pip lines) with values swapped for
anything JSON / TOML / YAML can hold, control characters and long numbers included, plus raw bytes.
The commands run in this process through typer's CliRunner (a spawn per example would be too slow),
on a fake machine; ``preflight --expect`` would detect the machine each time, so its file goes
through the same ``cli._guarded`` handler every command runs in, around the function that reads and
checks it.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import tempfile
from pathlib import Path
from typing import Any, Callable

from hypothesis import strategies as st
from typer.testing import CliRunner

from envkit import cli
from envkit.checks import CHECKS
from envkit.checks.expect import KEYS, check_expectations, load_expectations
from envkit.report import report_from_json
from envkit.specs.template import _FIELDS as template_fields

REPORT_PATH = Path(__file__).parents[1] / "data" / "reports" / "h200-580-torch2.11-cu130.json"
REPORT: dict[str, Any] = json.loads(REPORT_PATH.read_text(encoding="utf-8"))
# A target given by flags: spec never detects this machine (fast, and the same on every machine).
TARGET = ["--driver", "550.54.15", "--gpu", "sm_90", "--python", "3.11", "--platform", "linux-x86_64"]
runner = CliRunner()

# Text that breaks things: control characters, escape sequences, surrogates' neighbours, long digits.
nasty_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            " ",
            "\x1b[2J",
            "\x00",
            "\u202e",
            "\ud7ff",
            "[bold red]x[/]",
            "9" * 5000,
            "1." + "0" * 300,
            "sm_" + "9" * 400,
            "==" + "1" * 5000,
            "*",
            "2.5.*",
            ">=2,<3",
            "535.104.05",
            "12.1",
            "cu121",
            "nan",
            "-1",
        ]
    ),
)
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    nasty_text,
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(nasty_text, inner, max_size=4),
    max_leaves=12,
)


def paths_of(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document (keys and indexes from the root)."""
    found = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            found += paths_of(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found += paths_of(value, (*prefix, i))
    return found


REPORT_PLACES = paths_of(REPORT)[1:]


def same_kind(value: Any) -> Any:
    """A strategy for values of ``value``'s JSON type: a mutation the decoder accepts, so that the
    checks and the renderers see it too, not only the type check."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(min_value=-(2**40), max_value=2**40)
    if isinstance(value, float):
        return st.floats(allow_nan=False)
    if isinstance(value, str):
        return nasty_text
    if isinstance(value, list):
        return st.just([]) if not value else st.lists(st.sampled_from(value), max_size=6)
    return json_value


@st.composite
def mutated_reports(draw: st.DrawFn) -> str:
    """The recorded report with one to four values replaced (mostly by one of the same JSON type,
    sometimes by anything JSON holds), or cut short."""
    data = copy.deepcopy(REPORT)
    for _ in range(draw(st.integers(1, 4))):
        place = draw(st.sampled_from(REPORT_PLACES))
        parent: Any = data
        try:
            for key in place[:-1]:
                parent = parent[key]
            old = parent[place[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier swap removed this place
        parent[place[-1]] = draw(json_value if draw(st.integers(0, 3)) == 0 else same_kind(old))
    text = json.dumps(data, ensure_ascii=draw(st.booleans()))
    if draw(st.integers(0, 9)) == 0:
        text = text[: draw(st.integers(0, len(text)))]  # a node that died mid-write
    return text


raw_files = st.one_of(
    st.binary(max_size=300), st.text(max_size=300).map(lambda t: t.encode("utf-8", "replace"))
)


def run_cli(args: list[str]) -> tuple[int, str]:
    result = runner.invoke(cli.app, args)
    return result.exit_code, result.stderr


def assert_answered(code: int, stderr: str) -> None:
    """The property: an answer (0-3), and on 2 one line (plus a hint), never a crash."""
    assert code in (0, 1, 2, 3), (code, stderr)
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    if code == 2:
        lines = [ln for ln in stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("envkit: ")]
        assert errors, stderr
        assert all(ln.startswith(("envkit: ", "  hint:", "envkit: warning")) for ln in lines), stderr


@contextlib.contextmanager
def a_file(content: bytes | str, name: str):  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        if isinstance(content, str):
            content = content.encode("utf-8", "surrogatepass")
        path.write_bytes(content)
        yield str(path)


# -- doctor --from -------------------------------------------------------------------------------


def prop_doctor_from_report(text: str) -> None:
    with a_file(text, "report.json") as path:
        assert_answered(*run_cli(["doctor", "--from", path]))


LABELS = [
    "PyTorch version",
    "Is debug build",
    "CUDA used to build PyTorch",
    "ROCM used to build PyTorch",
    "OS",
    "GCC version",
    "Python version",
    "Python platform",
    "Is CUDA available",
    "CUDA runtime version",
    "CUDA_MODULE_LOADING set to",
    "GPU models and configuration",
    "Nvidia driver version",
    "cuDNN version",
    "HIP runtime version",
]


@st.composite
def collect_env_texts(draw: st.DrawFn) -> str:
    """collect_env-shaped text: its header and labels with fuzzed values, and package lines."""
    lines = ["Collecting environment information..."] if draw(st.booleans()) else []
    for label in draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=8)):
        lines.append(f"{label}: {draw(nasty_text)}")
    if draw(st.booleans()):
        lines.append("GPU models and configuration:")
        lines += [f"GPU {i}: {draw(nasty_text)}" for i in range(draw(st.integers(0, 3)))]
    if draw(st.booleans()):
        lines.append("Versions of relevant libraries:")
        lines += [f"[pip3] {draw(nasty_text)}=={draw(nasty_text)}" for _ in range(draw(st.integers(0, 3)))]
        lines += [f"[conda] {draw(nasty_text)} {draw(nasty_text)} {draw(nasty_text)}"]
    return "\n".join(lines) + "\n"


def prop_doctor_from_paste(text: str) -> None:
    with a_file(text, "paste.txt") as path:
        assert_answered(*run_cli(["doctor", "--from", path]))


def prop_doctor_from_raw(content: bytes) -> None:
    with a_file(content, "anything.json") as path:
        assert_answered(*run_cli(["doctor", "--from", path]))


# -- fleet and diff --------------------------------------------------------------------------------


def prop_fleet_and_diff(text: str, strict: bool) -> None:
    with a_file(text, "node-2.json") as bad:
        code, stderr = run_cli(["fleet", str(REPORT_PATH), bad, *(["--strict"] if strict else [])])
        assert_answered(code, stderr)
        assert code != 0 or "cannot" not in stderr
        assert_answered(*run_cli(["diff", str(REPORT_PATH), bad]))


# -- preflight --expect ------------------------------------------------------------------------------

toml_values = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.booleans(),
    nasty_text,
    st.lists(st.one_of(nasty_text, st.sampled_from(sorted(CHECKS))), max_size=3),
    st.floats(allow_nan=False, allow_infinity=False),
)


def toml_line(key: str, value: Any) -> str:
    """One ``key = value`` line; JSON's strings, numbers and lists are mostly TOML too (where not,
    that is one more malformed file to answer)."""
    return f"{json.dumps(key) if not key.isidentifier() else key} = {json.dumps(value)}"


@st.composite
def toml_files(draw: st.DrawFn, keys: list[str]) -> str:
    chosen = draw(st.dictionaries(st.one_of(st.sampled_from(keys), nasty_text), toml_values, max_size=5))
    lines = [toml_line(k, v) for k, v in chosen.items()]
    if draw(st.integers(0, 4)) == 0:
        lines.append(draw(nasty_text))
    return "\n".join(lines) + "\n"


FACTS = report_from_json(REPORT, "recorded").facts


def read_expectations(path: str) -> int:
    """What preflight does with its --expect file before and after detecting the machine."""
    check_expectations(load_expectations(path, tuple(CHECKS)), FACTS)
    return 0


def guarded_call(fn: Callable[[], int]) -> tuple[int, str]:
    """Run ``fn`` inside cli._guarded, the one handler every command has: its exit code and stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli._guarded(fn)
    return code, err.getvalue()


def prop_expect(text: str) -> None:
    with a_file(text, "node.toml") as path:
        assert_answered(*guarded_call(lambda: read_expectations(path)))


# -- templates ---------------------------------------------------------------------------------------

# The template reader's own field list: a field added there (``base``) is fuzzed too.
TEMPLATE_KEYS = list(template_fields)


@st.composite
def template_files(draw: st.DrawFn) -> str:
    """A valid template's name and description, and fuzzed values for the other fields (lists of
    requirement-like strings mostly, as templates hold)."""
    requirement = st.one_of(nasty_text, pip_lines)
    fields = {"name": "mine", "description": "fuzzed"}
    for key in draw(st.lists(st.sampled_from(TEMPLATE_KEYS), max_size=4, unique=True)):
        kind = (
            st.lists(requirement, max_size=3)
            if key.endswith(("packages", "companions", "channels"))
            else nasty_text
        )
        fields[key] = draw(st.one_of(kind, toml_values) if draw(st.integers(0, 3)) == 0 else kind)
    lines = [toml_line(k, v) for k, v in fields.items()]
    if draw(st.integers(0, 6)) == 0:
        lines.append(draw(nasty_text))
    return "\n".join(lines) + "\n"


def prop_template(text: str, fmt: str) -> None:
    with a_file(text, "mine.toml") as path:
        assert_answered(*run_cli(["spec", path, "--stdout", "--format", fmt, "--cuda", "cpu", *TARGET]))


# -- spec --check ------------------------------------------------------------------------------------

conda_lines = st.one_of(
    nasty_text,
    st.sampled_from(
        ["pytorch", "pytorch-cuda", "cudatoolkit", "cuda-version", "torchvision", "pytorch::pytorch"]
    ).flatmap(lambda name: nasty_text.map(lambda rest: f"{name}{rest}")),
)
pip_lines = st.one_of(
    nasty_text,
    st.sampled_from(
        ["torch", "torchvision", "-i ", "--extra-index-url ", "torch @ https://x/", "-r "]
    ).flatmap(lambda head: nasty_text.map(lambda rest: f"{head}{rest}")),
)


@st.composite
def environment_ymls(draw: st.DrawFn) -> str:
    deps = draw(
        st.lists(
            st.one_of(conda_lines, st.lists(pip_lines, max_size=3).map(lambda p: {"pip": p}), json_value),
            max_size=5,
        )
    )
    data: dict[str, Any] = {"dependencies": deps}
    if draw(st.booleans()):
        data["channels"] = draw(st.one_of(st.lists(nasty_text, max_size=3), json_value))
    text = json.dumps(data, ensure_ascii=draw(st.booleans()))  # JSON is YAML (flow style)
    if draw(st.integers(0, 4)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text


@st.composite
def requirements_txts(draw: st.DrawFn) -> str:
    return "\n".join(draw(st.lists(pip_lines, max_size=6))) + "\n"


def prop_spec_check(text: str, name: str) -> None:
    with a_file(text, name) as path:
        assert_answered(*run_cli(["spec", "--check", path, *TARGET]))


# -- envkit add / check --project: the project manifests ------------------------------------------


@st.composite
def pyproject_tomls(draw: st.DrawFn) -> str:
    """A uv or Poetry pyproject.toml whose values are anything (JSON's strings and arrays are TOML's)."""
    deps = json.dumps(draw(st.lists(pip_lines, max_size=4)))
    lines = [
        "[project]",
        'name = "x"',
        f"requires-python = {json.dumps(draw(nasty_text))}",
        f"dependencies = {deps}",
    ]
    if draw(st.booleans()):
        lines += [
            "[tool.uv.sources]",
            f"torch = {json.dumps(draw(st.one_of(nasty_text, st.just({'index': 'a'}))))}",
        ]
    if draw(st.booleans()):
        lines += ["[tool.poetry.dependencies]", f"torch = {json.dumps(draw(nasty_text))}"]
    return _cut(draw, "\n".join(lines) + "\n")


@st.composite
def pixi_tomls(draw: st.DrawFn) -> str:
    channels = json.dumps(draw(st.lists(nasty_text, max_size=2)))
    platforms = json.dumps(draw(st.lists(st.one_of(nasty_text, st.just("linux-64")), max_size=2)))
    lines = ["[workspace]", f"channels = {channels}", f"platforms = {platforms}", "[dependencies]"]
    lines.append(f"pytorch = {json.dumps(draw(nasty_text))}")
    if draw(st.booleans()):
        lines += ["[pypi-dependencies]", f"torch = {json.dumps(draw(nasty_text))}"]
    return _cut(draw, "\n".join(lines) + "\n")


def _cut(draw: st.DrawFn, text: str) -> str:
    return text[: draw(st.integers(0, len(text)))] if draw(st.integers(0, 4)) == 0 else text


def prop_project(text: str, name: str) -> None:
    with a_file(text, name) as path:
        folder = str(Path(path).parent)
        before = Path(path).read_bytes()
        assert_answered(*run_cli(["check", "--project", folder, *TARGET]))
        assert_answered(*run_cli(["add", "torch", "--project", folder, *TARGET, "--dry-run"]))
        assert Path(path).read_bytes() == before  # --dry-run changes nothing


# -- the categories: (name, strategy of argument tuples, property) --------------------------------

PROPERTIES: list[tuple[str, Any, Callable[..., None]]] = [
    ("doctor --from report", st.tuples(mutated_reports()), prop_doctor_from_report),
    ("doctor --from paste", st.tuples(collect_env_texts()), prop_doctor_from_paste),
    ("doctor --from bytes", st.tuples(raw_files), prop_doctor_from_raw),
    ("fleet and diff", st.tuples(mutated_reports(), st.booleans()), prop_fleet_and_diff),
    (
        "expect",
        st.tuples(st.one_of(toml_files(list(KEYS)), raw_files.map(lambda b: b.decode("latin-1")))),
        prop_expect,
    ),
    (
        "template",
        st.tuples(toml_files(TEMPLATE_KEYS), st.sampled_from(["pip", "conda", "uv"])),
        prop_template,
    ),
    ("spec --check yml", st.tuples(environment_ymls(), st.just("environment.yml")), prop_spec_check),
    ("spec --check txt", st.tuples(requirements_txts(), st.just("requirements.txt")), prop_spec_check),
]


def category_run(strategy: Any, prop: Callable[..., None]) -> Callable[[Any, int, Any], None]:
    """A harness category's ``run``: ``n`` examples of ``strategy`` (generated only: no shrinking,
    nothing replayed from a database), each one case of ``counts``, on a fake machine."""

    def run(counts: Any, n: int, rng: Any) -> None:
        if n <= 0:
            return
        from hypothesis import HealthCheck, Phase, given, seed, settings

        from tests.hostile.harness import fake_machine

        @settings(
            max_examples=n,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(strategy)
        def one(args: tuple[Any, ...]) -> None:
            counts.case(repr(args)[:300], lambda: prop(*args))

        with fake_machine():
            seed(rng.getrandbits(64))(one)()

    return run
