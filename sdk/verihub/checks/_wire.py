"""Plain data across the boundary between python_tests' runner and the candidate's process.

Stdlib only, Python 3.8+: this text runs inside the jail (the runner's program is this file, then
``_test_child.py``, ``_test_process.py`` and ``_test_runner.py``), and the tests import it on the host. Only values of
*exact* builtin
types cross: None, bool, int, float, complex, str, bytes, and list, tuple, dict, set and frozenset of
them; a subclass never does. Anything else crosses as a numbered reference to an object that stays on
its own side: ``h`` an object of the candidate's process, ``p`` a callable of the runner's (a
callback the tests passed in). Mutable containers are numbered as they are met, so shared and
cyclic structure survives, and a reply can refer to the very containers its request carried.

Decoding is defensive (the candidate's process writes half of the messages): sizes, counts and depth
are bounded and checked, and nothing but the types above is ever built; no pickle, no eval.
Exceptions cross as the names of their builtin classes, their args (if plain) and their text. A frame
is a 4-byte length, a kind (a request, or the answer to the request in flight) and a message.
"""

import builtins
import os
import struct

MAX_MESSAGE = 8 << 20  # bytes in one message
MAX_DEPTH = 100  # nested containers
REQUEST, ANSWER = b"Q", b"A"  # frame kinds: an answer refers to its request's containers
PLAIN_ARGS = (str, int, float, bool, type(None))

_LENGTH = struct.Struct(">I")
_FLOAT = struct.Struct(">d")
_COMPLEX = struct.Struct(">dd")


class WireError(Exception):
    """A message that is malformed, too big or too deep, or a value that cannot cross."""


class RemoteExit(BaseException):
    """The other side raised SystemExit, KeyboardInterrupt or GeneratorExit."""


class Encoder:
    """Encodes values into ``out``. ``export(obj)`` gives ``(tag, number)`` for an object that is not
    plain data; ``known`` are containers the other side already holds, by the same numbers."""

    def __init__(self, export, known=()):
        self.out = bytearray()
        self.export = export
        self.registered = list(known)
        self.memo = {id(container): number for number, container in enumerate(self.registered)}

    def value(self, value, depth=0):
        kind = type(value)
        out = self.out
        if value is None:
            out += b"N"
        elif kind is bool:
            out += b"T" if value else b"F"
        elif kind is int:
            data = value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)
            out += b"i" + _LENGTH.pack(len(data)) + data
        elif kind is float:
            out += b"f" + _FLOAT.pack(value)
        elif kind is complex:
            out += b"c" + _COMPLEX.pack(value.real, value.imag)
        elif kind is str:
            data = value.encode("utf-8", "surrogatepass")
            out += b"s" + _LENGTH.pack(len(data)) + data
        elif kind is bytes:
            out += b"b" + _LENGTH.pack(len(value)) + value
        elif kind in _CONTAINER_TAGS:
            self._container(value, kind, depth)
        else:
            tag, number = self.export(value)
            out += tag + _LENGTH.pack(number)
        if len(out) > MAX_MESSAGE:
            raise WireError("the value is larger than %d MiB" % (MAX_MESSAGE >> 20))

    def _container(self, value, kind, depth):
        if depth >= MAX_DEPTH:
            raise WireError("the value is nested deeper than %d levels" % MAX_DEPTH)
        mutable = kind in (list, dict, set)
        if mutable:
            number = self.memo.get(id(value))
            if number is not None:
                self.out += b"r" + _LENGTH.pack(number)
                return
            self.memo[id(value)] = len(self.registered)
            self.registered.append(value)
        self.out += _CONTAINER_TAGS[kind] + _LENGTH.pack(len(value))
        if kind is dict:
            for key, item in list(value.items()):
                self.value(key, depth + 1)
                self.value(item, depth + 1)
        else:
            for item in list(value):
                self.value(item, depth + 1)


class Decoder:
    """Decodes one value from ``data``. ``resolve(tag, number)`` gives the object of a reference;
    ``known`` are the containers that references ``r0``, ``r1``... name before new ones."""

    def __init__(self, data, resolve, known=()):
        self.data = data
        self.position = 0
        self.resolve = resolve
        self.registered = list(known)

    def value(self, depth=0):
        tag = self._take(1)
        if tag == b"N":
            return None
        if tag == b"T":
            return True
        if tag == b"F":
            return False
        if tag == b"i":
            return int.from_bytes(self._take(self._length()), "big", signed=True)
        if tag == b"f":
            return _FLOAT.unpack(self._take(8))[0]
        if tag == b"c":
            return complex(*_COMPLEX.unpack(self._take(16)))
        if tag == b"s":
            try:
                return self._take(self._length()).decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                raise WireError("a string that is not UTF-8") from None
        if tag == b"b":
            return self._take(self._length())
        if tag == b"r":
            number = self._length()
            if number >= len(self.registered):
                raise WireError("a reference to container %d, which was never sent" % number)
            return self.registered[number]
        if tag in (b"h", b"p"):
            return self.resolve(tag, self._length())
        if tag in _TAG_CONTAINERS:
            return self._container(_TAG_CONTAINERS[tag], depth)
        raise WireError("unknown tag %r at byte %d" % (tag, self.position - 1))

    def done(self):
        if self.position != len(self.data):
            raise WireError("%d bytes after the value" % (len(self.data) - self.position))

    def _container(self, kind, depth):
        if depth >= MAX_DEPTH:
            raise WireError("a value nested deeper than %d levels" % MAX_DEPTH)
        count = self._length()
        if count > len(self.data) - self.position:  # every item takes at least a byte
            raise WireError("a container of %d items in a shorter message" % count)
        try:
            if kind is dict:
                result = {}
                self.registered.append(result)
                for _ in range(count):
                    key = self.value(depth + 1)
                    result[key] = self.value(depth + 1)
                return result
            if kind is list:
                result = []
                self.registered.append(result)
                for _ in range(count):
                    result.append(self.value(depth + 1))
                return result
            if kind is set:
                result = set()
                self.registered.append(result)
                for _ in range(count):
                    result.add(self.value(depth + 1))
                return result
            items = [self.value(depth + 1) for _ in range(count)]
            return tuple(items) if kind is tuple else frozenset(items)
        except TypeError as error:  # an unhashable key or set member
            raise WireError(str(error)) from None

    def _length(self):
        return _LENGTH.unpack(self._take(4))[0]

    def _take(self, size):
        end = self.position + size
        if end > len(self.data):
            raise WireError("the message ends early")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk


_CONTAINER_TAGS = {list: b"l", tuple: b"t", dict: b"d", set: b"S", frozenset: b"z"}
_TAG_CONTAINERS = {tag: kind for kind, tag in _CONTAINER_TAGS.items()}


def encode(value, export, known=()):
    """``value`` as bytes, and the containers it numbered (``known`` first)."""
    encoder = Encoder(export, known)
    encoder.value(value)
    return bytes(encoder.out), encoder.registered


def decode(data, resolve, known=()):
    """The value in ``data`` (all of it), and the containers it numbered (``known`` first)."""
    if len(data) > MAX_MESSAGE:
        raise WireError("a message larger than %d MiB" % (MAX_MESSAGE >> 20))
    decoder = Decoder(bytes(data), resolve, known)
    value = decoder.value()
    decoder.done()
    return value, decoder.registered


def contents(containers):
    """Copies of what ``containers`` hold now, to send back after a call that may have changed them."""
    return [type(container)(container) for container in containers]


def restore(containers, copies):
    """Make each of ``containers`` hold what its copy holds (in-place changes made on the other side)."""
    if type(copies) is not list or len(copies) != len(containers):
        raise WireError("the changed arguments do not match the arguments sent")
    for container, copy in zip(containers, copies):
        if type(copy) is not type(container):
            raise WireError("a %s came back as a %s" % (type(container).__name__, type(copy).__name__))
        if type(container) is list:
            container[:] = copy
        else:
            container.clear()
            container.update(copy)


def frame(kind, data):
    return (len(data) + 1).to_bytes(4, "big") + kind + data


def rebuild(names, args, text):
    """The nearest builtin exception to one described by :func:`describe` on the other side; no
    class of the candidate's ever crosses."""
    text = text[:2000] if type(text) is str else ""
    args = args if type(args) is tuple and all(type(arg) in PLAIN_ARGS for arg in args) else ()
    for name in names:
        cls = getattr(builtins, name, None) if type(name) is str else None
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            continue
        if not issubclass(cls, Exception):
            return RemoteExit(text)  # SystemExit and its kind must not end the receiving side
        for attempt in (args, (text,)):
            try:
                return cls(*attempt)
            except Exception:  # noqa: BLE001 - a builtin that wants other arguments
                continue
    return Exception(text)


def describe(error, last_line=False):
    """An exception as it crosses: the names of its builtin classes, its args if plain, its text."""
    names = tuple(cls.__name__ for cls in type(error).__mro__ if getattr(builtins, cls.__name__, None) is cls)
    try:
        if last_line:
            import traceback  # only here: it costs milliseconds

            text = "".join(traceback.format_exception_only(type(error), error)).strip().splitlines()[-1]
        else:
            text = "%s: %s" % (type(error).__name__, error) if str(error) else type(error).__name__
    except BaseException:  # noqa: BLE001 - a __str__ that fails
        text = type(error).__name__
    args = tuple(error.args) if all(type(arg) in PLAIN_ARGS for arg in error.args) else ()
    return names, args, text[:2000]


def read_exact(fd, size):
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            os._exit(0)  # the other side is gone
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
