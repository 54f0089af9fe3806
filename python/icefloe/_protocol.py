"""Encoding the messages a client sends, and checking the replies it gets,
from the servers' own field list.

``_fields.json`` is generated from the C++ field tables (cpp/icefloe/protocol)
and checked against them by the C++ tests; the shared test vectors
(cpp/icefloe/protocol/testdata/vectors.json) are checked by both sides. So a
value the server would refuse is refused here first, with the same message,
and nothing is converted on the way: 2.5 is not an integer, -1 is not a
count, ``True`` is not a number. Replies are checked against the same list
(:func:`decode_reply`): a malformed one is a :class:`ProtocolError` naming the
reply and the field, never a KeyError somewhere later.
"""

from __future__ import annotations

import json
import numbers
import re
from importlib import resources
from typing import Any

from .errors import InvalidArgument, ProtocolError

# The servers' field list and shared constants, generated from the C++.
_DOC: dict[str, Any] = json.loads(
    resources.files(__package__).joinpath("_fields.json").read_text())
PROTOCOL_VERSION: int = _DOC["version"]
_MESSAGES: dict[str, dict[str, dict[str, Any]]] = {
    m["message"]: {f["name"]: f for f in m["fields"]} for m in _DOC["messages"]}
_NAME = re.compile(r"^[A-Za-z0-9_./-]*$")


def constants() -> dict[str, Any]:
    """The constants the client shares with the servers, from their C++
    definitions: ``epoch_order_version``, ``max_take_rows``, and ``piece``
    (the piece header's magic, version, size, flags and error words)."""
    return _DOC["constants"]


def fields(message: str) -> dict[str, dict[str, Any]]:
    """The field specs of ``message`` ("load", "epoch descriptor", ...)."""
    return _MESSAGES[message]


def _excerpt(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 64 else text[:64] + "..."


def _range(spec: dict[str, Any], lo: str = "min", hi: str = "max") -> str:
    if spec[hi] == 2**64 - 1:
        return f"at least {spec[lo]}"
    return f"{spec[lo]}..{spec[hi]}"


def _bad(what: str, spec: dict[str, Any], rule: str, value: Any, index: int | None = None):
    field = f"'{spec['name']}'" + (f"[{index}]" if index is not None else "")
    return InvalidArgument(f"{what}: {field} must be {rule}; got {_excerpt(value)}")


def _is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_int(what: str, spec: dict[str, Any], value: Any, index: int | None = None) -> int:
    if not _is_integer(value) or not spec["min"] <= int(value) <= spec["max"]:
        raise _bad(what, spec, f"an integer in {_range(spec)}", value, index)
    return int(value)


def _check_str(what: str, spec: dict[str, Any], value: Any, index: int | None = None) -> str:
    if not isinstance(value, str):
        raise _bad(what, spec, "a string", value, index)
    if not spec["min"] <= len(value.encode("utf-8", "surrogatepass")) <= spec["max"]:
        raise _bad(what, spec, f"a string of {_range(spec)} bytes", value, index)
    choices = spec.get("choices")
    if choices and value not in choices:
        raise _bad(what, spec, "one of " + ", ".join(f'"{c}"' for c in choices), value, index)
    return value


def _check_count(what: str, spec: dict[str, Any], value: list[Any] | tuple[Any, ...]) -> None:
    if not spec["min_items"] <= len(value) <= spec["max_items"]:
        raise InvalidArgument(f"{what}: '{spec['name']}' must have "
                              f"{_range(spec, 'min_items', 'max_items')} items; got {len(value)}")


def _check_list(what: str, spec: dict[str, Any], value: Any) -> list[Any]:
    try:
        import numpy as np

        if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "iu":
            # Whole integer arrays (take()'s row ids) are checked at once.
            items = value.tolist()
            if items and not (spec["min"] <= min(items) and max(items) <= spec["max"]):
                bad = next(i for i, v in enumerate(items) if not spec["min"] <= v <= spec["max"])
                raise _bad(what, spec, f"an integer in {_range(spec)}", items[bad], bad)
            value = items
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    if not isinstance(value, (list, tuple)):
        raise _bad(what, spec, "a list", value)
    _check_count(what, spec, value)
    check = _check_str if spec["type"] == "string_list" else _check_int
    return [check(what, spec, item, i) for i, item in enumerate(value)]


def check_field(what: str, spec: dict[str, Any], value: Any) -> Any:
    """``value`` as JSON for the field, or InvalidArgument naming it."""
    kind = spec["type"]
    if kind in ("int", "uint"):
        return _check_int(what, spec, value)
    if kind == "string":
        return _check_str(what, spec, value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise _bad(what, spec, "true or false", value)
        return value
    if kind in ("string_list", "int_list", "uint_list"):
        return _check_list(what, spec, value)
    if kind == "number":
        if not isinstance(value, numbers.Real) or isinstance(value, bool) or \
                not spec["min"] <= value <= spec["max"]:
            bounds = _range(spec)
            raise _bad(what, spec, f"a number {'' if bounds.startswith('at') else 'in '}{bounds}",
                       value)
        return value
    if kind == "object":
        if not isinstance(value, dict):
            raise _bad(what, spec, "an object", value)
        return value
    if kind == "object_list":
        if not isinstance(value, list):
            raise _bad(what, spec, "a list", value)
        _check_count(what, spec, value)
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise _bad(what, spec, "a list of objects", item, i)
        return value
    raise TypeError(f"field type {kind!r} is not encoded by the client")


# The rules that span fields, as the servers apply them.
def _check_message(message: str, what: str, body: dict[str, Any]) -> None:
    if message == "load":
        if not _NAME.match(body["name"]):
            raise InvalidArgument(f"load: 'name' may only hold letters, digits and - _ . /; "
                                  f"got '{body['name']}'")
        if sum(k in body for k in ("snapshot_id", "ref", "as_of_ms")) > 1:
            raise InvalidArgument("load: give at most one of 'snapshot_id', 'ref' and 'as_of_ms'")
    if message == "range descriptor" and "stop" in body and body["stop"] < body.get("start", 0):
        raise InvalidArgument(f"range descriptor: 'stop' {body['stop']} is before 'start' "
                              f"{body.get('start', 0)}")
    if message == "range descriptor":
        key = [k for k in ("seed", "epoch", "world_size") if k in body]
        if key and len(key) != 3:
            raise InvalidArgument("range descriptor: 'seed', 'epoch' and 'world_size' name one "
                                  "epoch together; " + " ".join(
                                      f"'{k}'" for k in ("seed", "epoch", "world_size")
                                      if k not in key) + " missing")
        if key and "lengths" not in body:
            raise InvalidArgument("range descriptor: 'seed', 'epoch' and 'world_size' bind the "
                                  "epoch a lengths request plans; they need 'lengths'")


_WHAT = {"range descriptor": "range descriptor", "epoch descriptor": "epoch descriptor",
         "rows descriptor": "rows descriptor"}
_KIND = {"range descriptor": "range", "epoch descriptor": "epoch", "rows descriptor": "rows"}


def encode(message: str, **values: Any) -> dict[str, Any]:
    """The JSON body of ``message`` with ``values`` (None: left out, so the
    server's default applies), checked field by field."""
    specs = fields(message)
    what = _WHAT.get(message, message)
    body: dict[str, Any] = {"v": PROTOCOL_VERSION}
    if message in _KIND:
        body["kind"] = _KIND[message]
    for name, value in values.items():
        if value is None:
            continue
        spec = specs.get(name)
        if spec is None:
            raise TypeError(f"{what} has no field {name!r} (fields: {', '.join(specs)})")
        body[name] = check_field(what, spec, value)
    for name, spec in specs.items():
        if spec["required"] and name not in body:
            raise InvalidArgument(f"{what}: missing '{name}'")
    _check_message(message, what, body)
    return body


def validate(message: str, body: dict[str, Any]) -> None:
    """Checks a raw body as the server would (for the shared test vectors);
    ``message`` is "load", "describe", "evict" or "descriptor"."""
    if message == "descriptor":
        kind = body.get("kind", "range")
        if "kind" in body:
            check_field("descriptor", fields("range descriptor")["kind"], kind)
        message = f"{kind} descriptor"
    what = _WHAT.get(message, message)
    if "v" in body and (not _is_integer(body["v"]) or body["v"] != PROTOCOL_VERSION):
        raise InvalidArgument(f"{what}: 'v' is an unsupported version: {_excerpt(body['v'])}")
    values = {k: v for k, v in body.items() if k in fields(message) and k != "kind"}
    for name, spec in fields(message).items():
        if name in values and values[name] is None:
            check_field(what, spec, None)  # null is no value of any field
    encode(message, **values)


# The reply each action answers with ("load" and "refresh" stream progress,
# then the description; "list" is a list of descriptions).
_REPLIES = {"describe": "dataset description", "list": "dataset description",
            "load": "dataset description", "refresh": "dataset description",
            "slice_map": "slice_map reply", "evict": "evict reply", "status": "status reply",
            "job.report": "ok reply"}


def _check_reply(message: str, what: str, body: Any) -> None:
    if not isinstance(body, dict):
        raise ProtocolError(f"{what}: not a JSON object; got {_excerpt(body)}")
    for name, spec in fields(message).items():
        if name not in body:
            if spec["required"]:
                raise ProtocolError(f"{what}: missing '{name}'")
            continue
        value = body[name]
        try:
            check_field(what, spec, value)
        except InvalidArgument as exc:
            raise ProtocolError(str(exc)) from None
        nested = spec.get("message")
        if nested is not None and spec["type"] == "object_list":
            for i, item in enumerate(value):
                _check_reply(nested, f"{what} '{name}'[{i}]", item)
        elif nested is not None:
            _check_reply(nested, f"{what} '{name}'", value)
    if message == "slice" and body["stop"] < body["start"]:
        raise ProtocolError(f"{what}: 'stop' {body['stop']} is before 'start' {body['start']}")
    if message == "shared file":
        held = body["held"]
        if len(held) % 2:
            raise ProtocolError(f"{what}: 'held' must hold (start, stop) pairs; "
                                f"got {len(held)} numbers")
        for i in range(0, len(held), 2):
            if held[i] >= held[i + 1] or (i and held[i] < held[i - 1]):
                raise ProtocolError(f"{what}: 'held' range {i // 2} [{held[i]}, {held[i + 1]}) "
                                    "is empty or before the one before it")
        more = body["segments"]
        if len(more) % 3:
            raise ProtocolError(f"{what}: 'segments' must hold (fd, inode, size) triples; "
                                f"got {len(more)} numbers")
        for i in range(0, len(more), 3):
            if more[i] > 2**31 - 1 or more[i + 2] == 0:
                raise ProtocolError(f"{what}: 'segments' segment {i // 3 + 1} has fd {more[i]} "
                                    f"and size {more[i + 2]} (fd 0..2^31-1, size 1 or more)")
        where = body.get("batches") or []
        if where and len(where) != len(more) + 3:
            raise ProtocolError(f"{what}: 'batches' must hold a (batch, first row, rows) "
                                f"triple per segment ({len(more) // 3 + 1}); got {len(where)} "
                                "numbers")


def check_reply(action: str, reply: Any) -> Any:
    """``reply``, a decoded result of ``action``, checked as the head's field
    tables write it (returned as it is); ProtocolError naming the reply and
    the field when it is malformed. Actions without a typed reply pass."""
    message = _REPLIES.get(action)
    if message is None:
        return reply
    if action == "list":
        if not isinstance(reply, list):
            raise ProtocolError(f"list reply: not a JSON list; got {_excerpt(reply)}")
        for i, item in enumerate(reply):
            _check_reply(message, f"list reply [{i}]", item)
        return reply
    if action in ("load", "refresh") and isinstance(reply, dict) and \
            reply.get("state") == "loading":
        message = "load progress"
    _check_reply(message, message, reply)
    return reply


def validate_reply(message: str, body: Any) -> None:
    """Checks ``body`` as the reply ``message`` ("dataset description",
    "evict reply", ...; for the shared test vectors)."""
    _check_reply(message, message, body)


def decode_reply(action: str, data: bytes) -> Any:
    """One result body of ``action``, parsed and checked (:func:`check_reply`)."""
    try:
        reply = json.loads(data)
    except ValueError:
        raise ProtocolError(f"{action}: the reply is not JSON: {data[:64]!r}") from None
    return check_reply(action, reply)


def decode(message: str, data: bytes | None) -> dict[str, Any]:
    """A message a server sends beside a stream rather than as an action's
    reply ("epoch shape": an epoch FlightInfo's app_metadata; "shared file":
    a stream by reference's schema metadata), parsed and checked."""
    try:
        body = json.loads(data or b"")
    except ValueError:
        raise ProtocolError(f"{message}: not JSON: {(data or b'')[:64]!r}") from None
    _check_reply(message, message, body)
    return body
