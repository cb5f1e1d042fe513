"""python_tests' child processes, as the runner sees them: starting one, frames to and from it under
a deadline, and ending it (see _test_runner.py).

Stdlib only, Python 3.8+; part of the runner's program (frame, MAX_MESSAGE and the frame kinds are
_wire.py's, child_main _test_child.py's).
"""

import os
import select
import signal
import sys
import time

CHILD_FLAG = "--verihub-child"


class SolutionFault(BaseException):
    """The candidate's process died, hung or broke the protocol: the test is an error. (Not an
    Exception, so that a test's ``except Exception`` cannot take it for a raise.)"""


class Process:
    """One child, which imports solution.py and answers requests. The first is a fork of this process,
    made before it read anything secret (cheap: no interpreter start); a replacement, made after,
    is a fresh interpreter running ``program`` (this run's main.py), so it inherits no memory of ours."""

    def __init__(self, gen, program=None):
        to_child, self.write_fd = os.pipe()
        self.read_fd, from_child = os.pipe()
        try:
            self.pid = os.fork() if program is None else spawn(program, to_child, from_child)
        except BaseException:
            for fd in (to_child, from_child, self.read_fd, self.write_fd):
                os.close(fd)
            raise
        if self.pid == 0:
            become_child(to_child, from_child)  # does not return
        os.close(to_child)
        os.close(from_child)
        os.set_blocking(self.write_fd, False)
        self.gen = gen
        self.wall_s = 0.0  # for messages; known once the parent has read stdin
        self.state = "starting"  # then "ready", "failed" (the import) or "gone"
        self.error = ""
        self.buffer = bytearray()

    def send(self, kind, data, deadline):
        view = memoryview(frame(kind, data))
        while view:
            try:
                view = view[os.write(self.write_fd, view) :]
            except BlockingIOError:  # the pipe is full: wait until the child reads, or the deadline
                if not wait(self.write_fd, select.POLLOUT, deadline):
                    raise self.gone(timed_out=True) from None
            except OSError:
                raise self.gone() from None

    def receive(self, deadline):
        """The next frame, as (kind, data), by ``deadline``."""
        while True:
            if len(self.buffer) >= 4:
                size = int.from_bytes(self.buffer[:4], "big")
                if not 1 <= size <= MAX_MESSAGE + 1:  # from _wire.py
                    raise self.broken("a frame of %d bytes" % size)
                if len(self.buffer) >= 4 + size:
                    kind, data = bytes(self.buffer[4:5]), bytes(self.buffer[5 : 4 + size])
                    del self.buffer[: 4 + size]
                    if kind not in (REQUEST, ANSWER):
                        raise self.broken("a frame of unknown kind")
                    return kind, data
            if not wait(self.read_fd, select.POLLIN, deadline):
                raise self.gone(timed_out=True)
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise self.gone()
            self.buffer += chunk

    def gone(self, timed_out=False):
        status = self.kill()
        if timed_out:
            return SolutionFault("timed out: the solution gave no answer in the time left (wall_s %gs)" % self.wall_s)
        if status is not None and os.WIFSIGNALED(status):
            return SolutionFault("the solution's process was killed by signal %d" % os.WTERMSIG(status))
        return SolutionFault(
            "the solution's process exited (status %s)" % (os.WEXITSTATUS(status) if status is not None else "unknown")
        )

    def broken(self, what):
        self.kill()
        return SolutionFault("the solution's process broke the protocol: %s" % what)

    def kill(self, wait=True):
        """End the child (and its process group); its wait status if ``wait``."""
        if self.state == "gone":
            return None
        self.state = "gone"
        for kill in (os.killpg, os.kill):
            try:
                kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
        for fd in (self.read_fd, self.write_fd):
            os.close(fd)
        return os.waitpid(self.pid, 0)[1] if wait else None


def become_child(read_fd, write_fd):
    """In a fork of the runner: keep the two pipe ends and nothing else of its (stdout carries the
    verdict), then serve as the child."""
    try:
        import gc

        gc.freeze()  # a collection would touch, and so copy, every page shared with the runner
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        low, high = sorted((read_fd, write_fd))
        for start, end in ((3, low), (low + 1, high), (high + 1, 1 << 20)):
            os.closerange(start, end)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        child_main(read_fd, write_fd)
    finally:
        os._exit(0)


def spawn(program, read_fd, write_fd):
    """A fresh interpreter running ``program`` as the child, with the two pipe ends and /dev/null."""
    for name in os.listdir("/proc/self/fd"):  # only what the child needs is inheritable
        fd = int(name)
        if fd > 2:
            try:
                os.set_inheritable(fd, fd in (read_fd, write_fd))
            except OSError:
                pass
    argv = [sys.executable, "-I", "-S", "-B", program, CHILD_FLAG, str(read_fd), str(write_fd)]
    null = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDWR, 0),
        (os.POSIX_SPAWN_DUP2, 0, 1),
        (os.POSIX_SPAWN_DUP2, 0, 2),
    ]
    return os.posix_spawn(sys.executable, argv, dict(os.environ), file_actions=null, setsid=True)


def wait(fd, event, deadline):
    poller = select.poll()
    poller.register(fd, event)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if poller.poll(left * 1000):
            return True
