"""The warm-pool worker (after _archive.py and _jailpy.py, whose helpers it uses): pid 1 of a long-lived
jail, forking once per run.

Stdlib only, Python 3.8+: it runs under the jail's system Python, not verihub's. The host sends
length-prefixed JSON requests on stdin and reads replies on stdout. A run gets /work as its working
directory, as in a fresh jail; the child sets its own limits, then executes Python code in-process (no
interpreter start) or execs a command. The worker never runs untrusted code itself; as pid 1 of the
jail's pid namespace it cannot be killed from inside, and it is not dumpable, so it cannot be traced.

Nothing of one run may be visible to the next. After each run the worker kills every other process,
removes SysV IPC objects and POSIX message queues, empties every writable mount, puts back what a run
can change about the worker from outside (the modes of those mounts, its rlimits, its CPU affinity),
then compares the jail with the state it recorded before the first run (:func:`observe`). The reply
says whether it came back clean; the host replaces a worker that did not.
"""

import base64
import ctypes
import json
import os
import resource
import select
import signal
import struct
import sys
import time
import traceback

# Preloaded so that a forked run does not pay for them.
import collections, dataclasses, decimal, fractions, functools, heapq, itertools, math, random, re, string  # noqa: E401,F401
import typing, unittest  # noqa: E401,F401

PROTOCOL_IN, PROTOCOL_OUT = os.dup(0), os.dup(1)
WORK = "/work"
LIBC = ctypes.CDLL(None, use_errno=True)
RLIMITS = sorted(getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_"))
IPC_RMID = 0
KILL_TIMEOUT_S = 2.0


def main() -> None:
    LIBC.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: runs cannot ptrace or read us
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # pid 1 gets only signals it handles: a run's SIGINT must not
    options = json.loads(sys.argv[1])
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # a stray print of ours can never corrupt the protocol
    mounts = writable_mounts()
    clean = observe(mounts, options["own_network"])
    send({"ready": True, "python": sys.version.split()[0], "writable": mounts})
    while True:
        request = receive()
        if request is None:
            return
        try:
            reply = run(request)
        except Exception:  # noqa: BLE001 - reported to the host as an infrastructure fault
            reply = {"error": traceback.format_exc()[-2000:]}
        left = reset(clean, mounts, options["own_network"])
        if left:
            reply["dirty"] = left
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


def send(message):
    body = json.dumps(message).encode()
    write_all(PROTOCOL_OUT, struct.pack(">I", len(body)) + body)  # noqa: F821 - from _jailpy.py


# -- one run -----------------------------------------------------------------------------------------


def run(request):
    if request.get("files"):
        unpack(from_frames(base64.b64decode(request["files"])), WORK)  # noqa: F821 - from _archive.py
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(request, in_read, out_write, err_write, (in_write, out_read, err_read))
    for fd in (in_read, out_write, err_write):
        os.close(fd)
    stdin = base64.b64decode(request.get("stdin") or "")
    outputs, timed_out, capped, status, usage = supervise(pid, in_write, stdin, out_read, err_read, request, start)
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
        reply["files"] = base64.b64encode(packed(WORK)).decode()  # noqa: F821 - from _jailpy.py
    return reply


def child(request, stdin, out_write, err_write, to_close):
    try:
        os.setsid()
        os.chdir(WORK)
        os.dup2(stdin, 0)
        os.dup2(out_write, 1)
        os.dup2(err_write, 2)
        for fd in (PROTOCOL_IN, PROTOCOL_OUT, stdin, out_write, err_write) + tuple(to_close):
            os.close(fd)
        limit(resource.RLIMIT_AS, request["memory_mb"] << 20)
        cpu = int(request["cpu_s"]) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        limit(resource.RLIMIT_FSIZE, request["max_file_mb"] << 20)
        limit(resource.RLIMIT_NPROC, request["max_procs"] + 1)  # + this worker
        for number in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("code") is not None:
            os._exit(run_main(request["code"], os.path.join(WORK, "main.py")))  # noqa: F821
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


def supervise(pid, stdin_fd, stdin, out_read, err_read, request, start):
    """Feed stdin and collect output until the child exits; kill its session at the deadline or the cap."""
    deadline = start + request["wall_s"]
    cap = request["max_output"]
    outputs = {out_read: bytearray(), err_read: bytearray()}
    open_fds = [out_read, err_read]
    pending = memoryview(stdin)
    if pending:
        os.set_blocking(stdin_fd, False)
    else:
        os.close(stdin_fd)
        stdin_fd = None
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
        writers = [stdin_fd] if stdin_fd is not None and status is None else []
        ready, can_write, _ = select.select(open_fds, writers, [], wait)
        if can_write:
            try:
                pending = pending[os.write(stdin_fd, pending[:65536]):]
            except BlockingIOError:
                pass
            except OSError:  # the child closed its stdin
                pending = pending[:0]
            if not pending:
                os.close(stdin_fd)
                stdin_fd = None
        if not ready and not can_write and status is not None:
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
    for fd in [out_read, err_read] + ([stdin_fd] if stdin_fd is not None else []):
        os.close(fd)
    return (bytes(outputs[out_read][:cap]), bytes(outputs[err_read][:cap])), timed_out, capped, status, usage


def kill_session(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


# -- back to the clean state -------------------------------------------------------------------------


def writable_mounts():
    """Every directory a run can write to: the jail's read-write mounts (/work, /tmp, /dev/mqueue)."""
    found = []
    with open("/proc/self/mountinfo") as mounts:
        for line in mounts:
            fields = line.split()
            point = fields[4].replace("\\040", " ")
            if "rw" in fields[5].split(",") and os.path.isdir(point) and not os.path.islink(point):
                found.append(point)
    return sorted(found)


def observe(mounts, own_network):
    """What a run could leave behind, as the worker sees it: compared after every run with the state
    recorded before the first one."""
    state = {
        "processes": other_processes(),
        "ipc": [ipc_ids(kind) for kind in ("shm", "msg", "sem")],
        "rlimits": [resource.getrlimit(kind) for kind in RLIMITS],
        "priority": os.getpriority(os.PRIO_PROCESS, 0),
        "cpus": sorted(os.sched_getaffinity(0)),
        "scheduler": os.sched_getscheduler(0),
        "hostname": os.uname().nodename,
        "cwd": os.getcwd(),
        "fds": sorted(os.listdir("/proc/self/fd")),
    }
    if own_network:  # abstract and bound unix sockets live as long as the network namespace
        with open("/proc/net/unix") as sockets:
            state["unix sockets"] = len(sockets.readlines()) - 1
    for root in mounts:
        info = os.lstat(root)
        try:
            names = os.listdir(root)
        except OSError as error:
            names = str(error)
        state[root] = (names, info.st_mode, info.st_uid, info.st_gid)
    return state


def reset(clean, mounts, own_network):
    """Put the jail back as ``clean`` describes it; '' when it is, else what still differs."""
    problems = []
    if not kill_others():
        problems.append("processes outlived SIGKILL")
    remove_ipc()
    for root in mounts:
        mode = clean[root][1] & 0o7777
        try:
            empty(root)  # noqa: F821 - from _archive.py
        except OSError as error:
            problems.append("cannot empty %s: %s" % (root, error))
        try:
            if os.lstat(root).st_mode & 0o7777 != mode:
                os.chmod(root, mode)
        except OSError:
            pass  # observe() reports the difference
    for kind, value in zip(RLIMITS, clean["rlimits"]):
        if resource.getrlimit(kind) != value:
            try:
                resource.setrlimit(kind, value)  # a run may lower ours (prlimit on pid 1); raising back may fail
            except (OSError, ValueError):
                pass
    if sorted(os.sched_getaffinity(0)) != clean["cpus"]:
        try:
            os.sched_setaffinity(0, clean["cpus"])
        except OSError:
            pass
    now = observe(mounts, own_network)
    return "; ".join(problems + ["%s changed" % key for key in clean if now.get(key) != clean[key]])


def other_processes():
    me = str(os.getpid())
    return [name for name in os.listdir("/proc") if name.isdigit() and name != me]


def kill_others():
    """SIGKILL every other process of the jail (escaped sessions and re-parented ones too) and reap them."""
    deadline = time.monotonic() + KILL_TIMEOUT_S
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # as pid 1 of the namespace: everyone else
        except OSError:
            pass
        reap()
        if not other_processes():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def ipc_ids(kind):
    """The ids of the namespace's SysV shared memory segments, message queues or semaphore sets."""
    with open("/proc/sysvipc/" + kind) as table:
        return [int(line.split()[1]) for line in table.readlines()[1:] if line.strip()]


def remove_ipc():
    for ident in ipc_ids("shm"):
        LIBC.shmctl(ident, IPC_RMID, None)
    for ident in ipc_ids("msg"):
        LIBC.msgctl(ident, IPC_RMID, None)
    for ident in ipc_ids("sem"):
        LIBC.semctl(ident, 0, IPC_RMID)


main()
