"""Frozen records to JSON-ready data and back, driven by the records' own type hints.

Records declare their fields with ``Optional[...]`` (not ``X | None``) because the hints are
evaluated here at run time and envkit still runs on Python 3.9.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import sys
import typing
from typing import Any, Literal, TypeVar, Union

from envkit.errors import InputError
from envkit.versions import ComputeCapability, NvVersion, Version, parse_compute_capability

T = TypeVar("T")

_NONE_TYPE = type(None)
_UNION_TYPES: tuple[Any, ...] = (Union,)
if sys.version_info >= (3, 10):
    import types

    _UNION_TYPES = (Union, types.UnionType)  # novermin (guarded by the version check)


class StrEnum(str, enum.Enum):
    """A closed set of strings (Python 3.11's ``enum.StrEnum``, for 3.9): a member equals, formats
    as and serializes to its value, so JSON and messages read the same as with plain strings."""

    def __str__(self) -> str:
        # Python 3.12 formats mixed-in enums as ``Class.MEMBER`` (f-strings, str()): keep the value.
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(str.__str__(self), spec)


def to_jsonable(value: object) -> Any:
    """Records, versions and enums to plain JSON data (dicts, lists, str, numbers, None)."""
    if isinstance(value, ComputeCapability):
        return str(value)
    if isinstance(value, Version):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


def from_jsonable(cls: type[T], data: object, where: str = "") -> T:
    """Build a record of type ``cls`` from JSON data; a bad value raises InputError naming it.

    Unknown keys are ignored (a newer envkit may add fields); missing keys take the field's
    default, or ``None`` for optional fields.
    """
    return typing.cast("T", _convert(cls, data, where or cls.__name__))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fail(where: str, expected: str, data: object) -> InputError:
    return InputError(f"{where}: expected {expected}, got {type(data).__name__} {data!r:.60}")


def _convert(tp: Any, data: object, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in _UNION_TYPES:
        args = typing.get_args(tp)
        if data is None and _NONE_TYPE in args:
            return None
        (inner,) = (a for a in args if a is not _NONE_TYPE)
        return _convert(inner, data, where)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if data not in allowed or type(data) not in {type(c) for c in allowed}:
            raise _fail(where, "one of " + ", ".join(map(str, allowed)), data)
        return data
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _convert_record(tp, data, where)
    if origin is tuple:
        if not isinstance(data, list):
            raise _fail(where, "a list", data)
        (item, _ellipsis) = typing.get_args(tp)
        return tuple(_convert(item, v, f"{where}[{i}]") for i, v in enumerate(data))
    if origin is dict:
        if not isinstance(data, dict):
            raise _fail(where, "an object", data)
        _key, item = typing.get_args(tp)
        return {str(k): _convert(item, v, f"{where}.{k}") for k, v in data.items()}
    if tp is ComputeCapability:
        cc = parse_compute_capability(data) if isinstance(data, str) else None
        if cc is None:
            raise _fail(where, 'a compute capability like "9.0"', data)
        return cc
    if isinstance(tp, type) and issubclass(tp, Version):
        if not isinstance(data, str):
            raise _fail(where, "a version string", data)
        try:
            return NvVersion(data) if tp is NvVersion else Version(data)
        except ValueError:
            raise _fail(where, "a version", data) from None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError:
            choices = ", ".join(str(m.value) for m in tp)
            raise _fail(where, f"one of {choices}", data) from None
    if tp is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
        raise _fail(where, "a number", data)
    if tp is Any:
        return data
    if tp in (str, int, bool):
        if type(data) is not tp:
            raise _fail(where, tp.__name__, data)
        return data
    raise TypeError(f"envkit cannot decode {tp!r} at {where}")  # a bug in a record, not input


def _convert_record(cls: type, data: object, where: str) -> Any:
    if not isinstance(data, dict):
        raise _fail(where, "an object", data)
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name in data:
            values[field.name] = _convert(hints[field.name], data[field.name], f"{where}.{field.name}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            if _NONE_TYPE not in typing.get_args(hints[field.name]):
                raise InputError(f"{where}: missing field {field.name!r}")
            values[field.name] = None
    return cls(**values)
