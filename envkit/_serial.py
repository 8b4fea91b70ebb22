"""Frozen records to JSON-ready data and back, driven by the records' own type hints.

Records declare their fields with ``Optional[...]`` (not ``X | None``) because the hints are
evaluated here at run time and envkit still runs on Python 3.9.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import sys
import typing
from typing import TYPE_CHECKING, Any, Callable, Final, Literal, Optional, TypeVar, Union

from envkit._files import MAX_NESTING
from envkit.errors import InputError
from envkit.versions import ComputeCapability, NvVersion, Version, parse_compute_capability

if TYPE_CHECKING:
    import msgspec

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


# The fast path: msgspec (https://jcristharif.com/msgspec/) decodes JSON bytes straight into the
# records and validates every field against the same hints, in C. It is taken only for documents it
# accepts whole; anything it refuses (a wrong type, a missing field, NaN, a lone surrogate, a huge
# integer) goes back to the caller, who parses the text and calls from_jsonable: that gives the same
# record or the one-line error naming the field, so the two paths never disagree on what they both
# accept. Two hints need care:
# - ComputeCapability is a NamedTuple, which msgspec reads as a JSON array; the records store it as
#   "9.0". The records that hold one get a subclass for decoding whose annotation names a marker
#   class instead (msgspec hands the marker's text to _dec_hook); the decoded objects are given
#   their real class back before anyone sees them (_unwire).
# - Any (CheckResult.metrics) is decoded as plain JSON data without the nesting limit of
#   envkit._files.parse_json; such values are measured afterwards and a deep one is handed back.
# Versions are parsed once per text and shared: a fleet's reports repeat the same few hundred.


class _CapabilityMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        # msgspec checks that _dec_hook returned an instance of the marker: the real thing is one.
        return isinstance(obj, ComputeCapability)


class _CapabilityText(metaclass=_CapabilityMeta):
    """Marker for a ComputeCapability field on the fast path: decoded from its "9.0" text."""


_PARSED: dict[type, dict[str, object]] = {_CapabilityText: {}, NvVersion: {}, Version: {}}
_PARSED_MAX: Final = 20_000  # distinct texts kept; a hostile file cannot grow the cache past it
# Where an Any value can sit in a document at most (the root is 0): a report's
# checks[i].metrics is at 3. A value nested deeper than MAX_NESTING minus this goes back to the slow
# path, which applies the exact limit.
_ANY_DEPTH: Final = 8


def _dec_hook(tp: type, obj: object) -> object:
    try:
        return _PARSED[tp][obj]  # type: ignore[index]
    except (KeyError, TypeError):  # not seen yet; not a text (a list is not hashable)
        return _parse(tp, obj)


def _parse(tp: type, obj: object) -> object:
    if not isinstance(obj, str):
        raise TypeError(f"expected a string, got {type(obj).__name__}")
    value: object
    if tp is _CapabilityText:
        value = parse_compute_capability(obj)
        if value is None:
            raise ValueError("not a compute capability")
    elif tp is NvVersion:
        value = NvVersion(obj)
    elif tp is Version:
        value = Version(obj)
    else:  # msgspec asks only for the types above; anything else is a ValidationError, so the
        # caller falls back to the hand-written decoder (msgspec docs, "Extending": a TypeError
        # from dec_hook is user-facing, every other exception escapes the decoder)
        raise TypeError(f"envkit's fast decoder has no hook for {tp!r}")
    parsed = _PARSED[tp]
    if len(parsed) < _PARSED_MAX:
        parsed[obj] = value
    return value


# Sections shared by many documents (envkit.report calls share(): a fleet's nodes carry the same
# torch, Python and CUDA libraries): a value of a shared hint is taken by msgspec as its raw bytes
# (msgspec.Raw, skipped at C speed) and decoded through _SECTIONS, so equal bytes are decoded and
# validated once and every document that holds them gets the same frozen record.
_SHARED: set[Any] = set()


class _Sections(dict[bytes, object]):
    """One hint's decoded sections by their text, and how many bytes of text it holds."""

    held = 0

    def keep(self, raw: bytes, value: object) -> None:
        if len(self) < _SECTIONS_MAX and self.held + len(raw) <= _SECTIONS_BYTES:
            self[raw] = value
            self.held += len(raw)

    def clear(self) -> None:
        super().clear()
        self.held = 0


_SECTIONS: dict[Any, _Sections] = {}
# Bounded per hint: at most this many distinct sections, holding at most 4 MiB of text between
# them (their records take a few times that). A homogeneous fleet needs a handful; in a fleet
# where a section differs on every node the cache fills and further sections are decoded each time.
_SECTIONS_MAX: Final = 4096
_SECTIONS_BYTES: Final = 4 * 1024 * 1024


def share(*hints: Any) -> None:
    """Decode values of these hints once per distinct text (see _SHARED above)."""
    _SHARED.update(hints)
    for cache in (_wire, _visitor, _decoder):
        cache.cache_clear()


class _Refused(Exception):
    """A decoded value the fast path hands back to the slow one (an Any nested too deep, a shared
    section msgspec refuses)."""


@dataclasses.dataclass(frozen=True)
class _Wire:
    """How values of one hint are decoded on the fast path."""

    hint: Any  # what msgspec is given
    visit: bool = False  # whether decoded values hold a record to give back its class, an Any or a section
    real: Optional[type] = None  # the record class, when ``hint`` is a decoding subclass of it
    fields: tuple[tuple[str, Any], ...] = ()  # a record's fields to visit, with their real hints


def _is_shared(tp: Any) -> bool:
    if tp in _SHARED:
        return True
    # msgspec takes Raw only on its own, not in a Union: Optional[section] is one raw value.
    return typing.get_origin(tp) in _UNION_TYPES and any(a in _SHARED for a in typing.get_args(tp))


@functools.cache
def _wire(tp: Any, top: bool = False) -> _Wire:
    """``top``: the hint of a shared section being decoded on its own (not taken raw again)."""
    import msgspec  # only to decode (doctor --from, fleet, diff): doctor's own run never needs it

    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if not top and _is_shared(tp):
        return _Wire(msgspec.Raw, visit=True)
    if tp is ComputeCapability:
        return _Wire(_CapabilityText)  # _dec_hook returns the real thing
    if tp is Any:
        return _Wire(tp, visit=True)
    if origin in _UNION_TYPES or origin is tuple or origin is dict:
        # A shared Optional[section] decoded on its own: its section is not taken raw again.
        inner = [_wire(a, top and origin in _UNION_TYPES) for a in args if a is not Ellipsis]
        visit = any(w.visit for w in inner)
        if all(w.hint == a for w, a in zip(inner, args)):
            return _Wire(tp, visit)  # nothing to change inside
        hint: Any
        if origin is tuple:
            hint = tuple.__class_getitem__((inner[0].hint, ...))  # tuple[X, ...]: the only tuples
        elif origin is dict:
            hint = dict.__class_getitem__((args[0], inner[1].hint))
        else:
            hint = Union[tuple(w.hint for w in inner)]
        return _Wire(hint, visit)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        changed = {name: _wire(h).hint for name, h in hints.items() if _wire(h).hint != h}
        fields = tuple((name, h) for name, h in hints.items() if _wire(h).visit)
        if not changed:
            return _Wire(tp, bool(fields), None, fields)
        # msgspec reads a class's hints through its MRO, the subclass's first; the fields, their
        # defaults and __post_init__ stay the record's own.
        namespace: dict[str, Any] = {"__annotations__": changed, "__module__": tp.__module__}
        raw = {name for name, h in changed.items() if h is msgspec.Raw}
        if raw:
            # msgspec 0.23 takes a Raw field only when it has no default (a default makes it
            # expect a parsed value: https://github.com/msgspec/msgspec/pull/1176): on the wire a
            # section has no default, and a document without one takes the slow path (msgspec
            # then leaves the field unset, so a plain default shows through: _sectioner refuses it).
            own = dict(tp.__dataclass_fields__)
            for name in raw:
                own[name] = copy.copy(own[name])
                own[name].default = own[name].default_factory = dataclasses.MISSING
            namespace["__dataclass_fields__"] = own
        sub = type(tp.__name__, (tp,), namespace)
        sub.__qualname__ = tp.__qualname__
        return _Wire(sub, True, tp, fields)
    return _Wire(tp)


@functools.cache
def _visitor(tp: Any, top: bool = False) -> Callable[[Any], Any]:
    """For a hint whose _wire visits: a function that returns the decoded value made whole (records
    given their real class back, shared sections decoded), or raises _Refused."""
    origin = typing.get_origin(tp)
    if not top and _is_shared(tp):
        return _sectioner(tp)
    if tp is Any:
        return _any
    if origin in _UNION_TYPES:
        (inner,) = (_visitor(a, top) for a in typing.get_args(tp) if a is not _NONE_TYPE)
        return lambda v: v if v is None else inner(v)
    if origin is tuple:
        item = _visitor(typing.get_args(tp)[0])
        return lambda v: tuple(map(item, v))
    if origin is dict:
        value = _visitor(typing.get_args(tp)[1])
        return lambda v: {k: value(x) for k, x in v.items()}
    wire = _wire(tp, top)
    real = wire.real
    fields = tuple((name, _visitor(h)) for name, h in wire.fields)

    def visit(v: Any) -> Any:
        if real is not None:
            object.__setattr__(v, "__class__", real)  # frozen records: past their __setattr__
        for name, f in fields:
            old = getattr(v, name)
            new = f(old)
            if new is not old:
                object.__setattr__(v, name, new)
        return v

    return visit


def _any(value: Any) -> Any:
    if value and isinstance(value, (dict, list)) and not _shallow(value, MAX_NESTING - _ANY_DEPTH):
        raise _Refused
    return value


def _sectioner(tp: Any) -> Callable[[Any], Any]:
    """The visitor of a shared hint: its raw text decoded through _SECTIONS (called ~20 times per
    report: the names it needs are bound once here)."""
    import msgspec

    cache = _SECTIONS.setdefault(tp, _Sections())
    decode = _decoder(tp, top=True).decode
    finish = _visitor(tp, top=True) if _wire(tp, top=True).visit else None

    def section(value: Any) -> Any:
        if type(value) is not msgspec.Raw:
            # A missing field: msgspec leaves it unset and the record's class attribute shows
            # through (Facts.python's None, a tuple's ()): the slow path gives it its default.
            raise _Refused
        raw = bytes(value)
        found = cache.get(raw, cache)
        if found is not cache:
            return found
        try:
            decoded = decode(raw)
        except msgspec.DecodeError:  # ValidationError is a DecodeError
            raise _Refused from None
        if finish is not None:
            decoded = finish(decoded)
        cache.keep(raw, decoded)
        return decoded

    return section


def _shallow(value: object, limit: int) -> bool:
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= limit:
                return False
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return True


@functools.cache
def _decoder(cls: Any, top: bool = False) -> msgspec.json.Decoder[Any]:
    import msgspec

    return msgspec.json.Decoder(_wire(cls, top).hint, dec_hook=_dec_hook)


def decode_json(cls: type[T], raw: bytes) -> Optional[T]:
    """A record of type ``cls`` straight from JSON bytes, or None where the caller must take the
    slow path (parse the text, then from_jsonable): see the comment above."""
    import msgspec

    root: Any = cls  # a hashable hint for the caches
    try:
        value = _decoder(root).decode(raw)
        if _wire(root).visit:
            value = _visitor(root)(value)
    except (msgspec.DecodeError, RecursionError, _Refused):  # ValidationError is a DecodeError
        return None
    return typing.cast("T", value)
