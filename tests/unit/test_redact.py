"""The one redaction (envkit.redact): its rules, and every way envkit shows a text (error messages,
the CLI's error handler, the crash log, --json output, create's commands, recorded Facts) goes
through it. The hypothesis test places random secrets where credentials hide and looks for them in
everything rendered."""

from __future__ import annotations

import stat
import sys
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from envkit.create.backends import Step
from envkit.create.backends.pip_args import hide_credentials as _hide_credentials
from envkit.detect.host import relevant_env
from envkit.errors import EnvkitError, InputError
from envkit.redact import MASK, is_secret_name, redact, redact_data
from envkit.render.jsonout import dumps

SECRET = "s3cret-t0ken"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://user:tok@host/simple/", "https://***@host/simple/"),
        ("git+ssh://git:tok@host/x", "git+ssh://***@host/x"),
        ("https://h/s?token=abc&page=2", "https://h/s?token=***&page=2"),
        (
            "https://b.s3/x.whl?X-Amz-Signature=ab12&X-Amz-Credential=AK%2F1",
            "https://b.s3/x.whl?X-Amz-Signature=***&X-Amz-Credential=***",
        ),
        ("HF_TOKEN=hf_abc CUDA_VISIBLE_DEVICES=0", "HF_TOKEN=*** CUDA_VISIBLE_DEVICES=0"),
        ("run --password=hunter2 now", "run --password=*** now"),
        ("Authorization: Bearer eyJhbGciOi.x.y", "Authorization: Bearer ***"),
        ("authorization: Basic YWxpY2U6czNjcmV0", "authorization: Basic ***"),
        ("nothing secret: torch==2.5.1+cu121 --index-url https://download.pytorch.org/whl/cu121", None),
        ("mail someone@example.com; 5 passed", None),
        (
            "https://conda.anaconda.org/t/ab-12cd/private-chan/linux-64",
            "https://conda.anaconda.org/t/***/private-chan/linux-64",
        ),
        # A Discourse topic (/t/<slug>/<id>: NVIDIA's and PyTorch's forums) holds no token: the Jetson
        # route's way out read 'forums.developer.nvidia.com/t/***/72048', a link nobody could follow.
        (
            "see https://forums.developer.nvidia.com/t/pytorch-for-jetson-version-1-9-0-now-available/72048; or",
            None,
        ),
        ("https://discuss.pytorch.org/t/some-topic/12345/7?u=x", None),
    ],
)
def test_the_rules(text: str, shown: str | None) -> None:
    assert redact(text) == (text if shown is None else shown)
    assert redact(redact(text)) == redact(text)  # idempotent: redacting twice changes nothing more


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "CLIENT_SECRET",
        "DB_PASSWORD",
        "PGPASSWD",
        "GPG_PASSPHRASE",
        "SMTP_PW",
        "AZURE_CREDENTIALS",
        "GOOGLE_APPLICATION_CREDS",
        "BASIC_AUTH",
        "NPM_AUTH_HEADER",
        "OPENAI_APIKEY",
        "WANDB_API_KEY",
        "SSH_KEY",
        "AWS_ACCESS_KEY_ID",
        "TLS_PRIVATE",
        "AWS_SESSION",
        "BEARER",
        "x-amz-signature",
        "sig",
        "key",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name", ["CUDA_VISIBLE_DEVICES", "NCCL_DEBUG", "TORCH_CUDA_ARCH_LIST", "KEYBOARD", "MONKEY_PATH", "page"]
)
def test_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


def test_json_values_and_secret_keys() -> None:
    data = {
        "url": f"https://u:{SECRET}@h/x",
        "env": {"HF_TOKEN": SECRET, "NCCL_DEBUG": "INFO"},  # a report's variables, from an older envkit
        "n": 3,
        "items": [f"TOKEN={SECRET}", None],
        "key": "driver.version",  # envkit's own fields are no secrets
    }
    out = redact_data(data)
    assert out == {
        "url": "https://***@h/x",
        "env": {"HF_TOKEN": MASK, "NCCL_DEBUG": "INFO"},
        "n": 3,
        "items": ["TOKEN=***", None],
        "key": "driver.version",
    }
    assert SECRET not in dumps(data)  # what every --json prints


def test_a_secret_variable_holding_a_list_a_dict_or_a_number_is_masked_too() -> None:
    # README: "in JSON, the value of a key that is a secret-looking variable name" is ***, whatever
    # the value is: a token written as a list, an object or a number is no less a secret. The same
    # container under a secret key and under an ordinary one: masked under the first only.
    shared = [SECRET]
    data = {"HF_TOKEN": shared, "x": shared, "AWS_SECRET_ACCESS_KEY": {"v": SECRET}, "DB_PASSWORD": 123456}
    out = redact_data(data)
    assert out == {"HF_TOKEN": MASK, "x": [SECRET], "AWS_SECRET_ACCESS_KEY": MASK, "DB_PASSWORD": MASK}
    # Nothing to hide stays as it is (None, empty), and ordinary keys keep their numbers.
    assert redact_data({"HF_TOKEN": None, "API_KEY": [], "n": 3}) == {"HF_TOKEN": None, "API_KEY": [], "n": 3}
    assert SECRET not in dumps({"env": {"HF_TOKEN": [SECRET]}})


def test_error_messages_and_hints_are_redacted() -> None:
    exc = InputError(
        f"--mirror https://alice:{SECRET}@h/simple: refused", hint=f"try https://alice:{SECRET}@h2"
    )
    exc.hint += f" or HF_TOKEN={SECRET}"  # a hint set later, as create's rollback does
    assert SECRET not in exc.message + exc.hint + str(exc) + repr(exc)
    assert "https://***@h/simple" in exc.message


def test_recorded_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NCCL_DEBUG": "INFO",
        "TORCH_HOME": f"https://u:{SECRET}@cache.example/torch",  # a value with URL credentials
        "PYTORCH_MIRROR": f"https://h/whl?token={SECRET}",
        "NCCL_IB_AUTH_TOKEN": SECRET,  # names the old rules let through:
        "TORCH_HUB_PASS": SECRET,
        "CUDA_STORE_PW": SECRET,
        "NVIDIA_CRED_FILE": SECRET,
        "NCCL_APIKEY": SECRET,
        "TORCH_S3_KEY_ID": SECRET,
        "TORCH_PRIVATE_INDEX": SECRET,
        "CUDA_SESSION": SECRET,
        "TORCH_BEARER": SECRET,
        "HOME": "/root",  # not one envkit records
    }
    recorded = relevant_env(env)
    assert recorded == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NCCL_DEBUG": "INFO",
        "PYTORCH_MIRROR": "https://h/whl?token=***",
        "TORCH_HOME": "https://***@cache.example/torch",
    }


def test_the_cli_error_handler_and_the_crash_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from envkit.cli import _guarded

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(
        sys, "argv", ["envkit", "create", "x", "--mirror", f"https://alice:{SECRET}@h/simple"]
    )

    class Leaky(EnvkitError):
        exit_code = 2

        def __init__(self) -> None:
            super().__init__("placeholder")
            self.message = f"raw https://alice:{SECRET}@h/simple"  # set around the constructor

    def user_error() -> int:
        raise Leaky

    def bug() -> int:
        raise RuntimeError(f"could not parse https://alice:{SECRET}@h/simple/torch/")

    assert _guarded(user_error) == 2
    assert _guarded(bug) == 70
    err = capsys.readouterr().err
    assert SECRET not in err and "https://***@h/simple" in err
    (log,) = (tmp_path / "envkit" / "logs").iterdir()  # atomic: no temporary file left beside it
    text = log.read_text(encoding="utf-8")
    assert SECRET not in text
    assert "--mirror https://***@h/simple" in text and "RuntimeError: could not parse https://***@h" in text
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert str(log) in err


def test_installer_credentials_move_to_its_environment() -> None:
    pip = ["py", "-m", "pip", "install", "torch", "--index-url", f"https://u:{SECRET}@h/whl/cpu"]
    pip += ["--extra-index-url", "https://pypi.org/simple", "--find-links", "/wheel house"]
    argv, env = _hide_credentials(pip, "pip")
    # --index-url moves; the others stay on the command line (nothing secret in them).
    assert argv == (
        "py",
        "-m",
        "pip",
        "install",
        "torch",
        "--extra-index-url",
        "https://pypi.org/simple",
        "--find-links",
        "/wheel house",
    )
    assert env == (("PIP_INDEX_URL", f"https://u:{SECRET}@h/whl/cpu"),)
    # A flat listing with credentials beside a local wheelhouse: both values of --find-links move
    # (the command line would override the variable), the folder as a file:// URL (no separator).
    uv = ["uv", "pip", "install", "--find-links", f"https://u:{SECRET}@h/whl/cpu/", "--find-links", "/w,h"]
    argv, env = _hide_credentials(uv, "uv")
    assert argv == ("uv", "pip", "install")
    assert env == (("UV_FIND_LINKS", f"https://u:{SECRET}@h/whl/cpu/,file:///w%2Ch"),)
    step = Step("install", argv, 1.0, env)
    assert SECRET not in step.shown() + repr(step)
    assert step.shown() == "UV_FIND_LINKS=https://***@h/whl/cpu/,file:///w%2Ch uv pip install"
    assert step.child_env({"PATH": "/bin"}) == {"PATH": "/bin", "UV_FIND_LINKS": env[0][1]}
    assert Step("x", ("true",), 1.0).child_env({"PATH": "/bin"}) is None  # inherit, as before


# Random secrets where credentials hide -------------------------------------------------------------

_TOKEN = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF, blacklist_characters="'\"<>\\`"),
    min_size=6,
    max_size=40,
)
_PLACES = (
    "userinfo",  # https://user:SECRET@host/
    "user-only",  # https://SECRET@host/
    "query",  # https://host/simple?token=SECRET
    "assignment",  # HF_TOKEN=SECRET
    "bearer",  # Authorization: Bearer SECRET
)


def _place(secret: str, where: str, host: str) -> str:
    quoted = urllib.parse.quote(secret, safe="")
    if where == "userinfo":
        return f"https://alice:{quoted}@{host}/simple/cu121"
    if where == "user-only":
        return f"https://{quoted}@{host}/simple"
    if where == "query":
        return f"https://{host}/simple/torch/?access_token={quoted}&page=2"
    if where == "assignment":
        return f"HF_TOKEN={quoted}"
    return f"Authorization: Bearer {urllib.parse.quote(secret, safe='')}"


def _renderings(secret: str, where: str, host: str, around: str) -> list[str]:
    """Every way a text holding ``secret`` is shown: a message, an error, a hint, --json, a command."""
    placed = _place(secret, where, host)
    message = around.format(placed)
    out = [
        redact(message),
        str(InputError(message, hint=message)),
        InputError("x", hint=message).hint,
        dumps({"message": message, "list": [message], "API_TOKEN": secret}),
        Step("install", ("pip", "install", "--index-url", placed), 1.0).shown(),
    ]
    if "://" in placed:
        argv, env = _hide_credentials(["pip", "install", "--index-url", placed], "pip")
        out += [Step("install", argv, 1.0, env).shown(), " ".join(argv)]  # argv: what `ps` shows
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    secret=_TOKEN,
    where=st.sampled_from(_PLACES),
    host=st.sampled_from(["127.0.0.1:8080", "pkgs.corp.example", "[::1]:3141"]),
    around=st.sampled_from(["{} failed", "'{}'", "(see {})", "{}\nnext line", '"{}"', "<{}>"]),
)
def test_no_rendered_text_holds_a_random_secret(secret: str, where: str, host: str, around: str) -> None:
    quoted = urllib.parse.quote(secret, safe="")
    # The same renderings of a harmless secret: a random one that is part of the fixed text (a
    # host, "pip install", the mask) proves nothing.
    fixed = "\n".join(_renderings("zzzzzz", where, host, around))
    assume(secret not in fixed and quoted not in fixed)
    for text in _renderings(secret, where, host, around):
        assert secret not in text and quoted not in text, text


def test_the_random_secret_check_can_fail() -> None:
    """Without the redaction the property above fails: the rendered texts would hold the secret."""
    for where in _PLACES:
        placed = _place(SECRET, where, "h")
        assert SECRET in placed and SECRET not in redact(placed), where
