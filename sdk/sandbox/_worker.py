"""The warm-pool worker (appended to _jailpy.py, whose helpers it uses): runs as pid 1 inside a long-lived jail and forks once per run.

Stdlib only, and Python 3.8+: it runs under the jail's system Python, not verihub's. The host sends
length-prefixed JSON requests on stdin and reads replies on stdout. Per run it makes a fresh directory,
forks, and the child sets its own limits, then executes Python code in-process (no interpreter start)
or execs a command. Afterwards every other process in the jail is killed and the files removed, so
one run cannot see or touch the next. The worker never runs untrusted code itself; as pid 1 of the
jail's pid namespace it cannot be killed from inside, and it is not dumpable, so it cannot be traced.
"""

import base64
import ctypes
import json
import os
import resource
import select
import shutil
import signal
import struct
import sys
import tarfile
import time
import traceback

# Preloaded so that a forked run does not pay for them.
import collections, dataclasses, decimal, fractions, functools, heapq, itertools, math, random, re, string  # noqa: E401,F401
import typing, unittest  # noqa: E401,F401

PROTOCOL_IN, PROTOCOL_OUT = os.dup(0), os.dup(1)
WORK = "/work"


def main() -> None:
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: runs cannot ptrace or read us
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # a stray print of ours can never corrupt the protocol
    send({"ready": True, "python": sys.version.split()[0]})
    number = 0
    while True:
        request = receive()
        if request is None:
            return
        number += 1
        try:
            reply = run(request, "%s/run%d" % (WORK, number))
        except Exception:  # noqa: BLE001 - reported to the host as an infrastructure fault
            reply = {"error": traceback.format_exc()[-2000:]}
        finally:
            clean_up()
        send(reply)


def receive():
    header = read_exact(4)
    if header is None:
        return None
    body = read_exact(struct.unpack(">I", header)[0])
    return json.loads(body) if body is not None else None


def read_exact(size):
    chunks, left = [], size
    while left:
        chunk = os.read(PROTOCOL_IN, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive_stdin(size, path):
    """The run's stdin follows its request on the protocol pipe. The kernel moves it into the file
    (splice): it never enters this process's memory, which every run is forked from, so no run can
    find its own stdin (a test runner's secrets) or an earlier run's in memory."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        left = splice_into(fd, size)
    finally:
        os.close(fd)
    if left:  # /tmp is full: drop the rest, so that the next request is read from its start
        null = os.open("/dev/null", os.O_WRONLY)
        splice_into(null, left)
        os.close(null)
        raise OSError("the run's stdin (%d bytes) does not fit in /tmp" % size)


def splice_into(fd, size):
    """Move ``size`` bytes from the protocol pipe to ``fd`` in the kernel; how many are left where
    ``fd`` refuses them or the pipe ends."""
    try:
        while size:
            if hasattr(os, "splice"):
                moved = os.splice(PROTOCOL_IN, fd, size)
            else:  # Python < 3.10
                moved = ctypes.CDLL(None, use_errno=True).splice(PROTOCOL_IN, None, fd, None, ctypes.c_size_t(size), 0)
            if moved <= 0:
                break
            size -= moved
    except OSError:
        pass
    return size


def send(message):
    body = json.dumps(message).encode()
    data = struct.pack(">I", len(body)) + body
    while data:
        data = data[os.write(PROTOCOL_OUT, data):]


def run(request, directory):
    os.makedirs(directory)
    if request.get("files"):
        unpack(base64.b64decode(request["files"]), directory)
    stdin_path = os.path.join("/tmp", ".stdin")
    receive_stdin(request["stdin_size"], stdin_path)
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(request, directory, stdin_path, out_write, err_write, (out_read, err_read))
    os.close(out_write)
    os.close(err_write)
    outputs, timed_out, capped, status, usage = supervise(pid, out_read, err_read, request, start)
    reply = {
        "exit_code": os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status,
        "stdout": base64.b64encode(outputs[0]).decode(),
        "stderr": base64.b64encode(outputs[1]).decode(),
        "wall_s": time.monotonic() - start,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "max_rss_kb": usage.ru_maxrss,
        "timed_out": timed_out,
        "output_capped": capped,
    }
    if request.get("keep_files"):
        reply["files"] = base64.b64encode(pack(directory)).decode()  # noqa: F821 - from _jailpy.py
    return reply


def child(request, directory, stdin_path, out_write, err_write, to_close):
    try:
        os.setsid()
        os.chdir(directory)
        os.dup2(os.open(stdin_path, os.O_RDONLY), 0)
        os.dup2(out_write, 1)
        os.dup2(err_write, 2)
        for fd in (PROTOCOL_IN, PROTOCOL_OUT, out_write, err_write) + tuple(to_close):
            os.close(fd)
        limit(resource.RLIMIT_AS, request["memory_mb"] << 20)
        cpu = int(request["cpu_s"]) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        limit(resource.RLIMIT_FSIZE, request["max_file_mb"] << 20)
        limit(resource.RLIMIT_NPROC, request["max_procs"] + 1)  # + this worker
        for number in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(request["env"], HOME=directory)
        if request.get("code") is not None:
            os._exit(run_main(request["code"], os.path.join(directory, "main.py")))  # noqa: F821
        argv = request["argv"]
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it; exec'd programs must not
        os.execvpe(argv[0], argv, dict(os.environ))
    except BaseException:  # noqa: BLE001
        try:
            traceback.print_exc()
        finally:
            os._exit(127)


def limit(kind, value):
    resource.setrlimit(kind, (value, value))


def supervise(pid, out_read, err_read, request, start):
    """Collect output until the child exits; kill its session at the deadline or the output cap."""
    deadline = start + request["wall_s"]
    cap = request["max_output"]
    outputs = {out_read: bytearray(), err_read: bytearray()}
    open_fds = [out_read, err_read]
    timed_out = capped = False
    status = usage = None
    while True:
        if status is None:
            waited, raw_status, raw_usage = os.wait4(pid, os.WNOHANG)
            if waited:
                status, usage = raw_status, raw_usage
        remaining = deadline - time.monotonic()
        if status is None and remaining <= 0:
            timed_out = True
            kill_session(pid)
        if not open_fds:
            if status is not None:
                break
            time.sleep(0.0005)
            continue
        wait = 0.0 if status is not None else max(0.0, min(remaining, 0.05))
        ready, _, _ = select.select(open_fds, [], [], wait)
        if not ready and status is not None:
            break  # the child is gone; what its leftovers write later does not count
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.remove(fd)
                continue
            outputs[fd] += chunk
            if len(outputs[out_read]) + len(outputs[err_read]) > cap and not capped:
                capped = True
                kill_session(pid)
    if status is None:
        _, status, usage = os.wait4(pid, 0)
    for fd in (out_read, err_read):
        os.close(fd)
    return (bytes(outputs[out_read][:cap]), bytes(outputs[err_read][:cap])), timed_out, capped, status, usage


def kill_session(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def clean_up():
    """Kill every process but this one, reap them, and empty /work and /tmp."""
    me = os.getpid()
    for _ in range(3):
        others = [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) != me]
        if not others:
            break
        for other in others:
            try:
                os.kill(other, signal.SIGKILL)
            except OSError:
                pass
        reap(block=True)
    reap(block=False)
    for root in (WORK, "/tmp"):
        for name in os.listdir(root):
            path = os.path.join(root, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass


def reap(block):
    deadline = time.monotonic() + 1.0
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0 or time.monotonic() > deadline:
            return


def unpack(data, directory):
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:  # noqa: F821
        for member in archive.getmembers():
            name = os.path.normpath(member.name)
            if name.startswith(("/", "..")) or member.isdev():
                continue
            member.name = name
            archive.extract(member, directory, set_attrs=False)


main()
