"""python_tests' runner inside the jail: the tests run here, the candidate's code only in a child.

Stdlib only, Python 3.8+. The run's program is ``_wire.py``, ``_test_child.py``, ``_test_process.py``
and this file, one after the other (see ``verihub.checks._harness``). It is the *parent*: it makes itself
non-dumpable (no process of the candidate's can read its memory, fds or environment), forks the
child before it reads anything secret, reads the tests and a nonce from stdin, unlinks the warm pool's
stdin file, and only then lets the child import solution.py. The child holds none of the parent's
files: its stdin, stdout and stderr are /dev/null, and it talks to the parent over two pipes. (This
holds only if the runner's memory holds no secret when it starts: the sandbox must not have the run's
stdin in the memory the runner is forked from. The warm pool moves stdin into its file with splice.)

The tests run here against a stand-in ``solution`` module whose attributes are requests to the child.
Only plain data crosses (``_wire.py``); any other value of the candidate's is a
:class:`SolutionObject`, which forwards calls, attributes, iteration, ``len``, ``bool``, ``str``,
``repr`` and items (re-checking the types that come back) but compares and hashes by identity: no
candidate object can pass for an expected value. A child that dies, hangs past its test's share of
the time or breaks the protocol fails that test, and the next test gets a fresh child (a new
interpreter, since this process now holds secrets). The verdict is this process's own record,
printed with the nonce and a MAC keyed by it; the child never holds either.

stdin: one JSON line {"nonce", "expected" (the test names), "budget_s", "wall_s"}, then the tests.
(encode, decode, describe, rebuild are _wire.py's, Process and SolutionFault _test_process.py's: the
same program.)
"""

import json
import os
import signal
import sys
import time

MARKER = "VERIHUB-TESTS"
RESERVE_S = 0.2  # kept back for each later test while one test runs long


def parent_main():
    started = time.monotonic()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a KeyboardInterrupt could skip an assertion
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a child that is gone is an EPIPE, not our end
    runner = Runner(os.path.abspath(__file__))  # main.py, as the sandbox saved it
    sys_path = list(sys.path)
    infra = protect()
    if infra is None:
        try:
            runner.start()  # a fork, before we read stdin; it runs nothing of the candidate's before "go"
        except OSError as error:
            infra = "cannot start the solution's process: %s" % error
    header, tests = read_stdin()
    if infra is not None:
        report(header["nonce"], {"infra": infra})
        return
    runner.wall_s = header["wall_s"]
    try:
        runner.go(sys_path)
    except SolutionFault as error:  # before any code of the candidate's ran: the sandbox's fault
        report(header["nonce"], {"infra": "the solution's process did not start: %s" % error})
        return
    # The candidate can write the work dir and /tmp: the parent imports nothing from there.
    writable = tuple(os.path.join(os.path.realpath(path), "") for path in (os.getcwd(), "/tmp"))
    sys.path[:] = [
        path for path in sys_path if path and not os.path.join(os.path.realpath(path), "").startswith(writable)
    ]
    sys.modules["solution"] = runner.stand_in()
    results = run_tests(runner, tests, header["expected"], started + header["budget_s"])
    runner.close()
    report(header["nonce"], {"results": results})


def protect():
    """Make this process non-dumpable: no process of the candidate's can read /proc/<us>/mem, fd or
    environ, or trace us. An error message if that fails (then no candidate code may run)."""
    try:
        import ctypes

        if ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
            return "prctl(PR_SET_DUMPABLE) failed"
    except (ImportError, OSError, AttributeError) as error:
        return "cannot make the runner non-dumpable: %s" % error
    return None


def read_stdin():
    chunks = []
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    if os.fstat(0).st_mode & 0o170000 == 0o100000:  # a regular file (the warm pool's): gone before the child looks
        path = os.readlink("/proc/self/fd/0")
        if path.startswith("/tmp/"):
            try:
                os.unlink(path)
            except FileNotFoundError:  # already unlinked, or never had a name
                pass
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    header, _, tests = b"".join(chunks).decode().partition("\n")
    return json.loads(header), tests


def run_tests(runner, source, expected, end):
    results = {}

    def record(name, outcome, message=""):
        results[name] = [outcome, message[-300:]]

    tests = type(sys)("test_solution")
    tests.__file__ = "test_solution.py"
    sys.modules["test_solution"] = tests
    runner.deadline = share(end, len(expected) + 1)
    try:
        exec(compile(source, "test_solution.py", "exec", dont_inherit=True), tests.__dict__)
    except BaseException as error:  # noqa: BLE001 - the candidate's import failed, or the tests did
        for name in expected or ["import"]:
            record(name, "error", failure(error))
        return results
    items = collect(tests)
    for index, (name, test, is_case) in enumerate(items):
        runner.deadline = share(end, len(items) - index)
        if is_case:
            record(name, *run_case(test))
            continue
        try:
            if test.__code__.co_flags & 0x80:  # CO_COROUTINE: an async def test
                import asyncio

                asyncio.run(test())
            else:
                test()
            record(name, "passed")
        except AssertionError as error:
            record(name, "failed", failure(error))
        except BaseException as error:  # noqa: BLE001 - a test's failure is its result, never the runner's end
            record(name, "error", failure(error))
    return results


def collect(tests):
    """(name, test, is a TestCase) for the test functions and TestCase methods the tests define;
    never anything imported (a solution object is not a test)."""
    test_case = getattr(sys.modules.get("unittest"), "TestCase", None)
    items = []
    for name, value in list(vars(tests).items()):
        if type(value) is type(collect):
            if name.startswith("test") and value.__module__ == "test_solution":
                items.append((name, value, False))
        elif (
            isinstance(value, type)
            and test_case is not None
            and issubclass(value, test_case)
            and value.__module__ == "test_solution"
        ):
            import unittest

            for case in unittest.defaultTestLoader.loadTestsFromTestCase(value):
                items.append(("%s.%s" % (name, case._testMethodName), case, True))
    return items


def run_case(case):
    import unittest

    class Outcome(unittest.TestResult):  # the error itself, in the words failure() gives a function's
        def addError(self, test, err):
            self.errors.append((test, failure(err[1])))

        def addFailure(self, test, err):
            self.failures.append((test, failure(err[1])))

    outcome = Outcome()
    case.run(outcome)
    if outcome.failures:
        return "failed", outcome.failures[0][1]
    if outcome.errors:
        return "error", outcome.errors[0][1]
    return ("skipped",) if outcome.skipped else ("passed",)


def share(end, items_left):
    """The deadline of the next item: the time left but a reserve for each later item, or at least
    an equal share, so that one test that hangs leaves time for the others."""
    now = time.monotonic()
    left = end - now
    return now + max(left / max(items_left, 1), left - RESERVE_S * (items_left - 1))


def failure(error):
    """One line on why a test failed. Formatting may ask a solution object for its ``str``, which
    can fail or hang (until the test's deadline): then the type's name is all there is."""
    try:
        if isinstance(error, (SolutionFault, RemoteExit, SolutionImportFailed)):
            return str(error)
        if type(error) is AssertionError:
            return "AssertionError: %s" % (str(error) or "assertion failed")
        import traceback

        return "".join(traceback.format_exception_only(type(error), error)).strip().splitlines()[-1]
    except BaseException:  # noqa: BLE001 - a test's failure is its result, never the runner's end
        return type(error).__name__


def report(nonce, verdict):
    """The verdict line: the nonce, a MAC of the payload keyed by it, the payload."""
    payload = json.dumps(verdict)
    try:
        from _blake2 import blake2b
    except ImportError:
        from hashlib import blake2b
    mac = blake2b(payload.encode(), key=nonce.encode(), digest_size=16).hexdigest()
    try:
        sys.stdout.flush()  # what the tests printed goes first
    except Exception:  # noqa: BLE001 - a test's failure is its result, never the runner's end
        pass
    write_all(1, ("\n%s %s %s %s\n" % (MARKER, nonce, mac, payload)).encode())


class SolutionImportFailed(BaseException):
    """solution.py failed to import in the child."""


class SolutionObject:
    """An object of the candidate's, held in the child. Attributes, calls and the operations below
    are forwarded; ``==``, ``<``, ``hash`` and ``isinstance`` are never asked of it."""

    __slots__ = ("_vh_runner", "_vh_gen", "_vh_number", "_vh_path")

    def __init__(self, runner, gen, number, path):
        for name, value in (("runner", runner), ("gen", gen), ("number", number), ("path", path)):
            object.__setattr__(self, "_vh_" + name, value)  # path: names from the module, to find it again

    def __getattr__(self, name):
        value = self._vh_runner.request("getattr", self, name)
        if type(value) is SolutionObject and value._vh_path is None and self._vh_path is not None:
            object.__setattr__(value, "_vh_path", self._vh_path + (name,))
        return value

    def __setattr__(self, name, value):
        self._vh_runner.request("setattr", self, name, value)

    def __call__(self, *args, **kwargs):
        return self._vh_runner.request("call", self, args, tuple(kwargs.items()))

    def __iter__(self):
        return self._vh_runner.operation(self, "iter", (), SolutionObject)

    def __next__(self):
        return self._vh_runner.operation(self, "next", ())

    def __len__(self):
        return self._vh_runner.operation(self, "len", (), int)

    def __bool__(self):
        return self._vh_runner.operation(self, "bool", (), bool)

    def __str__(self):
        return self._vh_runner.operation(self, "str", (), str)

    def __repr__(self):
        return self._vh_runner.operation(self, "repr", (), str)

    def __getitem__(self, key):
        return self._vh_runner.operation(self, "getitem", (key,))

    def __setitem__(self, key, value):
        self._vh_runner.operation(self, "setitem", (key, value))

    def __delitem__(self, key):
        self._vh_runner.operation(self, "delitem", (key,))


class Runner:
    """The parent's end of the conversation with the current child."""

    def __init__(self, program):
        self.program = program
        self.wall_s = 0.0
        self.process = None
        self.gen = 0
        self.deadline = 0.0
        self.sequence = 0
        self.sys_path = []
        self.objects = {}  # (gen, number) -> SolutionObject, so that one object is one proxy
        self.callables = []  # the tests' functions passed to the child, by number
        self.root = SolutionObject(self, 0, 0, ())

    def stand_in(self):
        """The ``solution`` module the tests import."""
        module = type(sys)("solution")

        def attribute(name):
            if name in ("__path__", "__spec__", "__loader__"):  # asked by the import system
                raise AttributeError(name)
            return self.root.__getattr__(name)

        module.__getattr__ = attribute
        return module

    def start(self):
        self.gen += 1
        self.process = Process(self.gen, None if self.gen == 1 else self.program)
        self.objects[(self.gen, 0)] = self.root

    def go(self, sys_path):
        self.sys_path = sys_path
        self.process.wall_s = self.wall_s
        self.process.send(REQUEST, encode(("go", sys_path), self.export)[0], time.monotonic() + 5)

    def child(self):
        """The current child (a fresh one if the last is gone). It may still be importing
        solution.py: :meth:`exchange` sends its request first and hears "ready" with the answer,
        so that the child does both without waiting for us in between."""
        if self.process.state == "gone":
            self.start()
            self.go(self.sys_path)
        if self.process.state == "failed":
            raise SolutionImportFailed(self.process.error)
        return self.process

    def hear_ready(self, process):
        message = self.decode(process.receive(self.deadline), ())[0]
        if message == ("ready",):
            process.state = "ready"
            return
        if type(message) is tuple and len(message) == 4 and message[0] == "import_error":
            process.state = "failed"
            process.error = message[3] if type(message[3]) is str else "solution.py failed to import"
            raise SolutionImportFailed(process.error)
        raise process.broken("it did not say whether solution.py imported")

    def request(self, kind, target, *fields):
        process = self.child()
        return self.exchange(process, (kind, self.locate(target)) + fields)

    def operation(self, target, name, args, kind=None):
        value = self.request("op", target, name, args)
        if kind is not None and type(value) is not kind:
            raise TypeError("the solution's %s() gave a %s, not a %s" % (name, type(value).__name__, kind.__name__))
        return value

    def locate(self, value):
        """The number of ``value`` in the current child; an object of an earlier child is found
        again by its path from the module, if it has one."""
        process = self.child()
        if value._vh_gen == process.gen:
            return value._vh_number
        if value._vh_path is None:
            raise SolutionFault("an object of a solution process that has since been replaced")
        number = 0
        for name in value._vh_path:
            found = self.exchange(process, ("getattr", number, name))
            if type(found) is not SolutionObject:
                raise SolutionFault("solution.%s is no longer the same kind of object" % ".".join(value._vh_path))
            number = found._vh_number
        object.__setattr__(value, "_vh_gen", process.gen)
        object.__setattr__(value, "_vh_number", number)
        self.objects[(process.gen, number)] = value
        return number

    def exchange(self, process, fields):
        """Send one request, serve the child's callbacks, return the result (or raise its exception)."""
        self.sequence += 1
        sequence = self.sequence
        data, sent = encode((fields[0], sequence) + fields[1:], self.export)
        process.send(REQUEST, data, self.deadline)
        if process.state == "starting":
            self.hear_ready(process)
        while True:
            kind, data = process.receive(self.deadline)
            message, table = self.decode((kind, data), sent if kind == ANSWER else ())
            if type(message) is not tuple or len(message) < 3 or type(message[1]) is not int:
                raise process.broken("a malformed message")
            if kind == REQUEST:
                self.callback(process, message, table)
                continue
            if message[1] != sequence:
                raise process.broken("an answer to another request")
            if message[0] == "fault":
                raise SolutionFault("the solution's answer could not be sent: %s" % (message[2],))
            if message[0] == "result" and len(message) == 4:
                self.restore(process, sent, message[3])
                return message[2]
            if message[0] == "raise" and len(message) == 6 and type(message[2]) is tuple:
                self.restore(process, sent, message[5])
                raise rebuild(message[2], message[3], message[4])
            raise process.broken("a malformed answer")

    def restore(self, process, sent, copies):
        try:
            restore(sent, copies)  # from _wire.py: in-place changes to the arguments
        except WireError as error:
            raise process.broken(str(error)) from None

    def callback(self, process, message, table):
        """The child calls one of the tests' functions it was given."""
        if (
            message[0] != "callback"
            or len(message) != 5
            or type(message[3]) is not tuple
            or type(message[4]) is not tuple
            or type(message[2]) is not int
            or not 0 <= message[2] < len(self.callables)
        ):
            raise process.broken("a malformed callback")
        _, sequence, number, args, kwargs = message
        try:
            reply = ("result", sequence, self.callables[number](*args, **dict(kwargs)), contents(table))
        except (SolutionFault, SolutionImportFailed):
            raise
        except BaseException as error:  # noqa: BLE001 - the tests' function raised: the child sees it
            reply = ("raise", sequence) + describe(error) + (contents(table),)
        process.send(ANSWER, encode(reply, self.export, table)[0], self.deadline)

    def decode(self, frame, known):
        kind, data = frame
        try:
            return decode(data, self.resolve, known)
        except (WireError, RecursionError, MemoryError, ValueError) as error:
            raise self.process.broken(str(error)[:200]) from None

    def resolve(self, tag, number):
        if tag == b"p":
            if number >= len(self.callables):
                raise WireError("no function %d was sent" % number)
            return self.callables[number]
        key = (self.process.gen, number)
        if key not in self.objects:
            self.objects[key] = SolutionObject(self, self.process.gen, number, None)
        return self.objects[key]

    def export(self, value):
        if type(value) is SolutionObject:
            return b"h", self.locate(value)
        if callable(value):
            self.callables.append(value)
            return b"p", len(self.callables) - 1
        raise TypeError(
            "only plain values, functions and the solution's own objects can be passed to "
            "the solution, not a %s" % type(value).__name__
        )

    def close(self):
        """End the child: without waiting, since the sandbox reaps what is left when we exit."""
        if self.process is not None:
            self.process.kill(wait=False)


if __name__ == "__main__" and sys.argv[1:2] != [CHILD_FLAG]:
    parent_main()
