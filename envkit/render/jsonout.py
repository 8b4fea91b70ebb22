"""JSON on stdout: the requested data of every ``--json`` (kept apart from rich, which a JSON run
never needs to import)."""

from __future__ import annotations

import itertools
import json
import types
from typing import TYPE_CHECKING, Any, Callable, Final, Union

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["dumps", "print_json"]

# Items of a streamed list encoded at once (print_json): a 100,000-node fleet's entries are never
# all in memory, and the per-item cost of a call is paid once a batch.
_BATCH = 512
# The widest integer msgspec writes (int64 and uint64).
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
# Values in a document from which msgspec writes it: json.dumps(indent=2) takes ~1 us a value, and
# importing msgspec ~6 ms of CPU, so a smaller document (one doctor report: ~400 values) is json's
# sooner (scripts/bench_doctor.py); a fleet (thousands of nodes, each batch of them) is msgspec's.
_MSGSPEC_FROM: Final = 5000


def dumps(data: Any) -> str:
    """``data`` as indented JSON, redacted (envkit.redact): no --json output carries a credential.

    The text is json.dumps(indent=2, ensure_ascii=False)'s, byte for byte. msgspec writes a large
    document (in C, ~10x faster: a 10,000-node fleet is 12 MB of JSON) where that is sure to be so,
    else json does."""
    text = _encode(data)
    return text.decode("utf-8") if isinstance(text, bytes) else text


def _encode(data: Any) -> Union[bytes, str]:
    from envkit.redact import redact_data

    clean = redact_data(data)
    if _plain_values(clean) >= _MSGSPEC_FROM:
        import msgspec

        try:
            return msgspec.json.format(msgspec.json.encode(clean), indent=2)
        except (msgspec.EncodeError, TypeError, ValueError, OverflowError):  # a lone surrogate, ...
            pass
    return json.dumps(clean, indent=2, ensure_ascii=False)


def _plain_values(data: Any) -> int:
    """How many values ``data`` holds when it is plain JSON data that msgspec writes as json.dumps
    does (text keys, integers of 64 bits, and floats that Python's repr writes without an exponent:
    msgspec writes 1e16 where repr writes 1e+16, and null for nan / inf where json writes NaN /
    Infinity); -1 when it is not."""
    stack = [data]
    seen: set[int] = set()  # containers met again (a fleet's nodes alike share theirs): once
    count = 0
    while stack:
        item = stack.pop()
        count += 1
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is dict or kind is list:
            if id(item) in seen:
                continue
            seen.add(id(item))
        if kind is dict:
            if not all(type(k) is str for k in item):
                return -1
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is int:
            if not _INT_MIN <= item <= _INT_MAX:
                return -1
        elif kind is float:
            if not (item == 0.0 or 1e-4 <= abs(item) < 1e16):  # also False for nan
                return -1
        else:  # a tuple (json writes a list), a str subclass, anything else: json decides
            return -1
    return count


def print_json(data: Any) -> None:
    """``dumps(data)`` and a newline on stdout. A top-level value that is a generator (a fleet's
    node entries, envkit.fleet.aggregate.Fleet.to_json(lazy=True)) is written as a list, item by
    item: the text is the same as for the list, without holding all of it.

    JSON exchanged between programs is UTF-8 (RFC 8259 §8.1), whatever the locale says: bytes go to
    the stream's buffer as they are (no second copy of the text), so a latin-1 or ASCII stdout
    (LC_ALL=C, PYTHONIOENCODING) gets the same document instead of an encoding error. A reader that
    goes away or a full stdout is envkit.render.streams' to handle."""
    from envkit.render.streams import flush_stdout, write_stdout

    if isinstance(data, dict) and any(isinstance(v, types.GeneratorType) for v in data.values()):
        _write_streamed(data, write_stdout)
    else:
        write_stdout(_encode(data))
    write_stdout("\n")
    flush_stdout()


def _nested(text: Union[bytes, str], by: int) -> Union[bytes, str]:
    """An indent=2 dump as json.dumps writes it ``by`` spaces deeper in a document."""
    if isinstance(text, bytes):
        return text.replace(b"\n", b"\n" + b" " * by)
    return text.replace("\n", "\n" + " " * by)


def _batches(items: Iterator[Any]) -> Iterator[list[Any]]:
    while batch := list(itertools.islice(items, _BATCH)):
        yield batch


def _write_streamed(data: dict[str, Any], write: Callable[[Union[bytes, str]], None]) -> None:
    # json.dumps(indent=2) writes a value nested at depth d as its own dump with every line after
    # the first indented by 2 * d more spaces: the pieces below put the same text together.
    from envkit.redact import redact_data
    from envkit.render.streams import outcome

    if not data:
        write("{}")
        return
    write("{")
    for i, (key, value) in enumerate(data.items()):
        write(("," if i else "") + "\n  " + json.dumps(key, ensure_ascii=False) + ": ")
        if isinstance(value, types.GeneratorType):
            # Items go in batches: one redaction pass and one encode call per batch, not per item.
            # A batch's dump is "[\n  item,\n  item\n]": its items, two spaces deeper, are the
            # document's items at this depth.
            empty = True
            for batch in _batches(value):
                if outcome().ended:  # the reader left (or stdout is full): the rest goes nowhere
                    return
                body = _encode(batch)
                write(("[" if empty else ",") + "\n  ")
                write(_nested(body[2:-2], 2))
                empty = False
            write("[]" if empty else "\n  ]")
        else:
            # Redacted as dumps would, the key's own rule included (a secret-like variable's value).
            write(_nested(_encode(redact_data({key: value})[key]), 2))
    write("\n}")
