"""python_tests' child: the only process that runs the candidate's code (see _test_runner.py).

Stdlib only, Python 3.8+. The first child is a fork of the runner, made before the runner read
anything secret; a replacement is a fresh interpreter (``python3 -I -S -B main.py --verihub-child
READ_FD WRITE_FD``). Either way its stdin, stdout and stderr are /dev/null and it holds only its two
pipes. It waits for "go" (sent once the runner holds its secrets alone), imports solution.py, and
answers requests (attributes, calls, operations) until its pipe closes. Everything it sends is
untrusted; the runner checks it. (encode, decode, frame, describe and the rest are _wire.py's: the
same program.)
"""

import os
import sys


def child_main(read_fd, write_fd):
    child = Child(read_fd, write_fd)
    message = child.receive(())[1]
    sys.path[:] = list(message[1])  # ("go", sys.path): the parent holds its secrets alone by now
    sys.argv = ["solution.py"]
    sys.dont_write_bytecode = True
    try:
        child.objects.append(__import__("solution"))
    except BaseException as error:  # noqa: BLE001 - the candidate's failure, reported
        child.send(("import_error",) + describe(error, last_line=True))
        while os.read(read_fd, 1 << 16):  # until the parent closes: its request must not fail to send
            pass
        os._exit(0)
    child.send(("ready",))
    child.serve(None, ())


class Child:
    def __init__(self, read_fd, write_fd):
        self.read_fd, self.write_fd = read_fd, write_fd
        self.objects = []  # number -> object; 0 is the solution module
        self.numbers = {}
        self.sequence = 0

    def serve(self, until, pending):
        """Answer requests; return the answer to our callback ``until`` when it comes."""
        while True:
            kind, message, table = self.receive(pending)
            if kind == ANSWER:
                if message[1] == until:
                    return message
                continue
            try:
                reply = ("result", message[1], self.perform(message), contents(table))
            except BaseException as error:  # noqa: BLE001 - the candidate's, reported to the parent
                reply = ("raise", message[1]) + describe(error) + (contents(table),)
            self.send(reply, table)

    def perform(self, message):
        kind, target = message[0], self.objects[message[2]]
        if kind == "getattr":
            return getattr(target, message[3])
        if kind == "setattr":
            return setattr(target, message[3], message[4])
        if kind == "call":
            return target(*message[3], **dict(message[4]))
        return OPERATIONS[message[3]](target, *message[4])

    def call_parent(self, number, args, kwargs):
        self.sequence -= 1  # the child's sequence numbers are negative, the parent's positive
        sequence = self.sequence
        sent = self.send(("callback", sequence, number, args, tuple(kwargs.items())))
        reply = self.serve(sequence, sent)
        restore(sent, reply[-1])  # what the tests' function changed in its arguments
        if reply[0] == "result":
            return reply[2]
        raise rebuild(reply[2], reply[3], reply[4])

    def send(self, message, answering=None):
        """A request, or the answer to the request whose containers are ``answering``."""
        try:
            data, sent = encode(message, self.export, answering or ())
        except WireError as error:  # too big or too deep: the parent hears why
            data, sent = encode(("fault", message[1], str(error)), self.export)
        write_all(self.write_fd, frame(REQUEST if answering is None else ANSWER, data))
        return sent

    def receive(self, pending):
        body = read_exact(self.read_fd, int.from_bytes(read_exact(self.read_fd, 4), "big"))
        kind = body[:1]
        message, table = decode(body[1:], self.resolve, pending if kind == ANSWER else ())
        return kind, message, table

    def export(self, value):
        if type(value) is Callback:
            return b"p", value.number
        number = self.numbers.get(id(value))
        if number is None:
            number = self.numbers[id(value)] = len(self.objects)
            self.objects.append(value)  # kept alive, so that its id is not reused
        return b"h", number

    def resolve(self, tag, number):
        if tag == b"p":
            return Callback(self, number)
        return self.objects[number]


class Callback:
    """One of the tests' functions, passed as an argument: calling it asks the parent to."""

    def __init__(self, child, number):
        self.child, self.number = child, number

    def __call__(self, *args, **kwargs):
        return self.child.call_parent(self.number, args, kwargs)


OPERATIONS = {
    "len": len,
    "bool": bool,
    "iter": iter,
    "next": next,
    "str": str,
    "repr": repr,
    "getitem": lambda target, key: target[key],
    "setitem": lambda target, key, value: target.__setitem__(key, value),
    "delitem": lambda target, key: target.__delitem__(key),
}


if __name__ == "__main__" and sys.argv[1:2] == ["--verihub-child"]:  # a replacement child
    try:
        child_main(int(sys.argv[2]), int(sys.argv[3]))
    finally:
        os._exit(0)
