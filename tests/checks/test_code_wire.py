"""The wire format between python_tests' runner and the candidate's process (verihub/checks/_wire.py).

The candidate's process writes half of the messages, so decoding must turn any byte string into either
plain data of exact builtin types or a WireError: never another exception, another type, or unbounded
work.
"""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pytest

from verihub.checks._wire import MAX_DEPTH, MAX_MESSAGE, WireError, contents, decode, describe, encode, rebuild, restore

PLAIN = (type(None), bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset)


def no_objects(value: object) -> tuple[bytes, int]:
    raise AssertionError(f"{value!r} is plain data")


def refuse(tag: bytes, number: int) -> object:
    raise WireError("no references here")


def round_trip(value: Any) -> Any:
    data, _ = encode(value, no_objects)
    return decode(data, refuse)[0]


def only_plain(value: Any, depth: int = 0) -> None:
    assert type(value) in PLAIN, type(value)
    assert depth < MAX_DEPTH + 2
    if type(value) is dict:
        for key, item in value.items():
            only_plain(key, depth + 1)
            only_plain(item, depth + 1)
    elif type(value) in (list, tuple, set, frozenset):
        for item in value:
            only_plain(item, depth + 1)


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        2**200,
        -(2**200),
        255,
        -128,
        0.1,
        -0.0,
        math.inf,
        3 + 4j,
        "",
        "é \ud800 \U0001f600",
        b"\x00\xff",
        [],
        [1, [2, [3]]],
        (1, "a", None),
        {"k": [1], 2: (3,), (4, 5): {6}},
        {1, 2},
        frozenset({"x"}),
    ],
)
def test_plain_values_come_back_equal_and_of_the_same_type(value: Any) -> None:
    back = round_trip(value)
    assert type(back) is type(value) and back == value
    only_plain(back)


def test_nan_and_the_sign_of_zero_survive() -> None:
    assert math.isnan(round_trip(math.nan))
    assert math.copysign(1.0, round_trip(-0.0)) == -1.0


def test_subclasses_never_cross_as_data() -> None:
    class Lying(int):
        def __eq__(self, other: object) -> bool:
            return True

    exported: list[object] = []

    def export(value: object) -> tuple[bytes, int]:
        exported.append(value)
        return b"h", len(exported) - 1

    data, _ = encode([Lying(1), "ok", True], export)
    assert exported and type(exported[0]) is Lying
    assert decode(data, lambda tag, number: ("handle", tag, number))[0] == [("handle", b"h", 0), "ok", True]


def test_shared_and_cyclic_containers_keep_their_shape() -> None:
    row = [0]
    shared = round_trip([row, row])
    assert shared[0] is shared[1]
    cycle: list[Any] = []
    cycle.append(cycle)
    back = round_trip(cycle)
    assert back[0] is back


def test_an_answer_can_name_the_containers_of_its_request() -> None:
    xs = [1, 2]
    request, sent = encode(("call", [xs]), no_objects)
    _, table = decode(request, refuse)  # the other side's copies, by the same numbers
    table[1].append(3)
    answer, _ = encode((table[1], contents(table)), no_objects, table)
    value, copies = decode(answer, refuse, sent)[0]
    assert value is xs
    restore(sent, copies)
    assert xs == [1, 2, 3]


def test_restore_refuses_what_does_not_match() -> None:
    with pytest.raises(WireError):
        restore([[1]], [{"a": 1}])
    with pytest.raises(WireError):
        restore([[1]], [])


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"i",
        b"i\x00\x00\x00\x09",
        b"s\x00\x00\x00\x02\xff\xfe",
        b"l\xff\xff\xff\xff",
        b"d\x00\x00\x00\x01l\x00\x00\x00\x00N",
        b"S\x00\x00\x00\x01d\x00\x00\x00\x00",
        b"r\x00\x00\x00\x00",
        b"?",
        b"NN",
        b"f\x00\x00",
        b"t\x00\x00\x00\x02N",
        b"l\x00\x00\x00\x01" * (MAX_DEPTH + 1) + b"N",
    ],
)
def test_malformed_messages_are_wire_errors(data: bytes) -> None:
    with pytest.raises(WireError):
        decode(data, refuse)


def test_random_bytes_never_raise_anything_but_wire_errors() -> None:
    generator = random.Random(12)
    seeds = [encode(value, no_objects)[0] for value in ([1, "a", {2: (3.5, b"x")}], {"k": {1, 2}}, (None, [[]]))]
    for _ in range(3000):
        data = bytearray(generator.choice(seeds))
        for _ in range(generator.randint(1, 4)):
            data[generator.randrange(len(data))] = generator.randrange(256)
        try:
            value, _ = decode(bytes(data), refuse)
        except WireError:
            continue
        only_plain(value)


def test_sizes_and_depth_are_bounded() -> None:
    with pytest.raises(WireError, match="larger than"):
        encode("x" * (MAX_MESSAGE + 1), no_objects)
    with pytest.raises(WireError, match="larger than"):
        decode(b"N" * (MAX_MESSAGE + 1), refuse)
    deep: list[Any] = []
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(WireError, match="deeper"):
        encode(deep, no_objects)
    claims_many = b"l" + struct.pack(">I", 2**31) + b"N" * 8
    with pytest.raises(WireError, match="shorter message"):
        decode(claims_many, refuse)


def test_exceptions_cross_as_their_nearest_builtin() -> None:
    class ParseError(ValueError):
        pass

    rebuilt = rebuild(*describe(ParseError("bad input")))
    assert type(rebuilt) is ValueError and str(rebuilt) == "bad input"
    assert type(rebuild(*describe(KeyError("k")))) is KeyError
    assert isinstance(rebuild(*describe(SystemExit(0))), BaseException)
    assert not isinstance(rebuild(*describe(SystemExit(0))), Exception)  # cannot be caught as a raise
    assert type(rebuild(("NotABuiltin", 3, "AssertionError"), ("x",), "AssertionError: x")) is AssertionError
    assert type(rebuild(("open",), (), "")) is Exception  # a name that is no exception class
