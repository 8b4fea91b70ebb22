"""The one redaction: what envkit shows, logs or writes never carries a secret.

Every message, exception text, crash log and JSON output goes through :func:`redact` (and
:func:`redact_data` for JSON), and the environment variables recorded in Facts are filtered by
:func:`is_secret_name`. The rules, documented in the README ("Secrets"):

- a URL's userinfo: ``https://user:token@host/`` -> ``https://***@host/`` (pip and uv accept
  credentials in index URLs), and an anaconda.org token in a channel URL's path:
  ``https://conda.anaconda.org/t/<token>/ch`` -> ``…/t/***/ch``;
- the value of a ``NAME=value`` pair (an environment assignment, a URL query parameter) whose NAME
  is secret-like: ``?token=abc`` -> ``?token=***``, ``HF_TOKEN=abc`` -> ``HF_TOKEN=***``;
- an HTTP credential written out: ``Bearer abc`` and ``Authorization: Basic abc`` -> ``Bearer ***``
  and ``Authorization: Basic ***``;
- a token whose issuer's shape marks it as one, wherever it stands (Hugging Face ``hf_…``, GitHub
  ``ghp_…`` / ``github_pat_…``, ``sk-…``, GitLab ``glpat-…``, Slack ``xox?-…``, AWS ``AKIA…``).

A name is secret-like when it contains TOKEN, SECRET, PASS (PASSWORD, PASSWD, PASSPHRASE), CRED,
AUTH, APIKEY / API_KEY, PRIVATE, SESSION, BEARER, COOKIE or SIGNATURE, or ends in ``_KEY``,
``_KEY_ID``, ``_PW`` or ``_SIG`` (or is KEY, PW or SIG), in any case, ``-`` read as ``_``.

This module is stdlib-only and imports nothing from envkit, so that every other module (the error
classes included) may use it.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Final

__all__ = ["MASK", "is_secret_name", "redact", "redact_data"]

MASK: Final = "***"

_SECRET_NAME_RE: Final = re.compile(
    r"TOKEN|SECRET|PASS|CRED|AUTH|API_?KEY|PRIVATE|SESSION|BEARER|COOKIE|SIGNATURE"
    r"|(?:^|_)(?:KEY|KEY_ID|PW|SIG)$"
)
# scheme://userinfo@. The match runs greedily to the last "@" before whitespace or a quote. That
# over-redacts a path holding "@", which beats leaking a token that has an unescaped "/" or "@".
_USERINFO_RE: Final = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^\s'\"<>]*@")
# An anaconda.org channel token in a URL's path: https://conda.anaconda.org/t/<token>/channel
# (conda's channel URLs; conda-lock reads it as a token to hide too, conda_lock/models/channel.py).
# Not a Discourse topic, /t/<slug>/<number> (NVIDIA's and PyTorch's forums, which envkit's hints link):
# a channel name after a token is never all digits.
_CONDA_TOKEN_RE: Final = re.compile(
    r"(://[^\s/'\"<>]+(?:/[^\s/'\"<>]+)*?/t/)[^\s/'\"<>]+(?![^\s/'\"<>]|/\d+(?![\w-]))"
)
# NAME=value: an environment assignment (``HF_TOKEN=…``) or a query parameter (``?sig=…&``).
_VARIABLE_RE: Final = re.compile(r"[A-Z][A-Z0-9_]*$")
# A name may follow "-" (``--password=…``); it may not start inside another name.
_PAIR_RE: Final = re.compile(r"(?<![A-Za-z0-9_.])([A-Za-z_][A-Za-z0-9_.-]*)=([^\s&#;'\"<>]+)")
# RFC 6750 (Bearer) and RFC 7617 (Basic) credentials as an Authorization header spells them.
_BEARER_RE: Final = re.compile(r"\b(Bearer)\s+[A-Za-z0-9._~+/=-]+")
_AUTH_HEADER_RE: Final = re.compile(r"\b(Authorization:\s*[A-Za-z]+)\s+[^\s'\"<>]+", re.IGNORECASE)
# Tokens that are secrets whatever surrounds them, as their issuers shape them, found bare in pasted
# text ("token: hf_…" in a log): Hugging Face (hf_), GitHub (ghp_, gho_, ghu_, ghs_, ghr_,
# github_pat_), OpenAI-style (sk-), GitLab (glpat-), Slack (xox?-), AWS access key ids (AKIA…).
_TOKEN_RE: Final = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|sk-[A-Za-z0-9_-]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b"
)
_TOKEN_MARKS: Final = ("hf_", "gh", "github_pat_", "sk-", "glpat-", "xox", "AKIA")


def is_secret_name(name: str) -> bool:
    """Whether a variable, parameter or field called ``name`` may hold a secret.

    >>> [is_secret_name(n) for n in ("HF_TOKEN", "db-password", "AWS_ACCESS_KEY_ID", "NCCL_DEBUG")]
    [True, True, True, False]
    """
    return _SECRET_NAME_RE.search(name.upper().replace("-", "_")) is not None


@functools.lru_cache(maxsize=4096)  # a fleet's JSON repeats the same few hundred keys
def _secret_variable(key: object) -> bool:
    return isinstance(key, str) and _VARIABLE_RE.match(key) is not None and is_secret_name(key)


def _pair(match: re.Match[str]) -> str:
    name = match.group(1)
    return f"{name}={MASK}" if is_secret_name(name) and match.group(2) != MASK else match.group(0)


def redact(text: str) -> str:
    """``text`` with every credential it holds replaced by ``***``.

    >>> redact("https://user:t0ken@pypi.example.com/simple/torch/ failed")
    'https://***@pypi.example.com/simple/torch/ failed'
    >>> redact("https://download.pytorch.org/whl/cu121/")
    'https://download.pytorch.org/whl/cu121/'
    >>> redact("https://h.example/s?sig=abc&page=2 HF_TOKEN=hf_x")
    'https://h.example/s?sig=***&page=2 HF_TOKEN=***'
    >>> redact("https://conda.anaconda.org/t/ab-12cd/private-chan/linux-64")
    'https://conda.anaconda.org/t/***/private-chan/linux-64'
    """
    # Each pattern runs only where its literal part is: a fleet's JSON has 10,000s of strings.
    if "://" in text:
        text = _USERINFO_RE.sub(rf"\1{MASK}@", text)
        if "/t/" in text:
            text = _CONDA_TOKEN_RE.sub(rf"\1{MASK}", text)
    if "=" in text:
        text = _PAIR_RE.sub(_pair, text)
    if "Bearer" in text:
        text = _BEARER_RE.sub(rf"\1 {MASK}", text)
    if ":" in text:
        text = _AUTH_HEADER_RE.sub(rf"\1 {MASK}", text)
    if any(mark in text for mark in _TOKEN_MARKS):
        text = _TOKEN_RE.sub(MASK, text)
    return text


# redact_data meets the same short texts again and again (a fleet's 10,000 nodes share their driver,
# torch and check texts, and their keys): each short text, and each key with its short text, is
# redacted once. Bounded: 8192 of each, of at most 256 characters.
_SHORT: Final = 256
_PLAIN: Final = frozenset({int, float, bool, type(None)})


@functools.lru_cache(maxsize=8192)
def _redact_short(text: str) -> str:
    return redact(text)


@functools.lru_cache(maxsize=8192)
def _short_entry(key: object, value: str) -> str:
    return MASK if value and _secret_variable(key) else _redact_short(value)


def _entry(key: object, value: Any, seen: dict[int, Any]) -> Any:
    # Whatever a secret-like variable holds is masked: a token written as a list, an object or a
    # number is no less a secret (None and empty values hide nothing). The container itself is not
    # walked, so its redaction (memoized in ``seen``) never depends on the key it sits under.
    if value and _secret_variable(key):
        return MASK
    if isinstance(value, str):
        return redact(value)
    return value if type(value) in _PLAIN else _redact(value, seen)


def redact_data(data: Any) -> Any:
    """A JSON-like value with :func:`redact` applied to every string, and the value of every key
    that is a secret-like environment variable (``"HF_TOKEN": "…"``, as a report's ``env`` from an
    older envkit may hold; a number, a list or an object alike) replaced by ``***``. envkit's own
    fields are lower-case and kept as they are (``"key": "driver.version"`` is no secret)."""
    return _redact(data, {})


def _redact(data: Any, seen: dict[int, Any]) -> Any:
    # ``seen``: the containers this call redacted already, by identity (a fleet's nodes alike
    # share their facts and checks dicts: each is redacted once). Nothing changes the data while
    # the call runs and every container in it lives until it returns, so no id is reused.
    if isinstance(data, str):
        return _redact_short(data) if len(data) <= _SHORT else redact(data)
    if not isinstance(data, (dict, list, tuple)):
        return data
    done = seen.get(id(data))
    if done is not None:
        return done
    if isinstance(data, dict):
        done = {
            key: _short_entry(key, value)
            if type(value) is str and len(value) <= _SHORT
            else _entry(key, value, seen)
            for key, value in data.items()
        }
    else:
        done = [v if type(v) in _PLAIN else _redact(v, seen) for v in data]
    seen[id(data)] = done
    return done
