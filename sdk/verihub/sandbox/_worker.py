"""The warm-pool worker (after _archive.py and _jailpy.py, whose helpers it uses): pid 1 of a long-lived
jail, forking once per run.

Stdlib only, Python 3.8+: it runs under the jail's system Python, not verihub's. The host sends a
length-prefixed JSON request on stdin and reads the reply on stdout. A run gets /work as its working
directory, as in a fresh jail; it executes Python code in-process (no interpreter start) or execs a
command. As pid 1 of the jail's pid namespace the worker cannot be killed from inside, and it is not
dumpable, so it cannot be traced or read.

Nothing of one run may be visible to the next, in the jail or in memory:

- The worker never holds a run's data. Each run is a fresh fork of it that reads its own request
  (code, files, stdin) and tells the worker only its limits; the worker collects the output in one
  buffer that it zeroes afterwards, and a second fork packs the work dir when it is asked for. A fork's
  memory is the worker's, so it holds no trace of earlier runs.
- After each run the worker kills every other process, removes SysV IPC objects and POSIX message
  queues, empties every writable mount, puts back what a run can change about the worker from outside
  (the modes of those mounts, its rlimits, its CPU affinity), then compares the jail with the state it
  recorded before the first run (:func:`observe`). Its last message says whether the jail came back
  clean; the host replaces a worker that did not.

Per request the worker writes: a JSON header (exit code, times, and the sizes of what follows), the
run's stdout and stderr, the work dir as frames when asked for (length-prefixed), a JSON status.
"""

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
import collections, dataclasses, decimal, fractions, functools, heapq, itertools, math, random, re, string  # noqa: E401,F401 - preloaded for the runs it forks
import typing, unittest  # noqa: E401,F401 - preloaded for the runs it forks

PROTOCOL_IN, PROTOCOL_OUT = os.dup(0), os.dup(1)
WORK = "/work"
LIBC = ctypes.CDLL(None, use_errno=True)
RLIMITS = sorted(getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_"))
IPC_RMID = 0
KILL_TIMEOUT_S = 2.0
CHUNK = 65536


def main() -> None:
    LIBC.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: runs cannot ptrace or read us
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # pid 1 gets only signals it handles: a run's SIGINT must not
    options = json.loads(sys.argv[1])
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # a stray print of ours can never corrupt the protocol
    mounts = writable_mounts()
    clean = observe(mounts, options["own_network"])
    outputs = Outputs()
    send({"ready": True, "python": sys.version.split()[0], "writable": mounts})
    while serve(clean, mounts, options["own_network"], outputs):
        pass


def serve(clean, mounts, own_network, outputs):
    """One run, start to clean state; False once the host has closed the protocol."""
    control_read, control_write = os.pipe()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        child(control_write, out_write, err_write, (control_read, out_read, err_read))
    for fd in (control_write, out_write, err_write):
        os.close(fd)
    started = read_all(control_read)  # noqa: F821 - from _jailpy.py; the run's limits, once it starts
    if not started:  # the host closed the protocol before sending a request
        os.waitpid(pid, 0)
        return False
    start = json.loads(started)
    if "error" in start:  # the fork could not set the run up (or restore its work dir), reported as such
        os.waitpid(pid, 0)
        for fd in (out_read, err_read):
            os.close(fd)
        header = {"error": start["error"], "restore": start.get("restore"), "stdout": 0, "stderr": 0, "files": False}
    else:
        header = supervise(pid, out_read, err_read, start, outputs)
    kill_others()  # before the work dir is packed: nothing of the run is left to interfere
    send(header)
    for which in (0, 1):
        write_all(PROTOCOL_OUT, outputs.view(which, header["stdout" if which == 0 else "stderr"]))  # noqa: F821 - defined by _archive.py, sent to the jail before this file
    if header["files"]:
        send_files(start["max_files"])
    outputs.wipe()
    left = reset(clean, mounts, own_network)
    send({"clean": not left, "left": left})
    return True


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


def child(control, out_write, err_write, to_close):
    """The run: a fresh fork of the worker. It reads its own request, sets up /work and stdin, reports
    its limits to the worker, and becomes the program. It never returns."""
    try:
        for fd in to_close:
            os.close(fd)
        request = receive()
        if request is None:
            os._exit(0)
        restore(request)
        stdin = stdin_file(request["stdin_size"])
        os.close(PROTOCOL_IN)
        os.close(PROTOCOL_OUT)
        limits = {key: request[key] for key in ("wall_s", "max_output", "keep_files", "max_files")}
        write_all(control, json.dumps(limits).encode())  # noqa: F821 - defined by _archive.py, sent to the jail before this file
        os.close(control)
    except BaseException as error:  # noqa: BLE001 - any failure is reported to the host, never the worker's silent end
        try:
            failed = {"error": traceback.format_exc()[-2000:]}
            if isinstance(error, Restore):
                failed["restore"] = str(error)
            write_all(control, json.dumps(failed).encode())  # noqa: F821 - defined by _archive.py, sent to the jail before this file
        finally:
            os._exit(127)
    try:
        os.setsid()
        os.chdir(WORK)
        os.dup2(stdin, 0)
        os.dup2(out_write, 1)
        os.dup2(err_write, 2)
        for fd in (stdin, out_write, err_write):
            os.close(fd)
        limit(resource.RLIMIT_AS, request["memory_mb"] << 20)
        resource.setrlimit(resource.RLIMIT_CPU, (request["cpu_s"], request["cpu_s"] + 1))  # SIGXCPU, then SIGKILL
        limit(resource.RLIMIT_FSIZE, request["max_file_mb"] << 20)
        limit(resource.RLIMIT_NPROC, request["max_procs"] + 1)  # + this worker
        for number in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("code") is not None:
            LIBC.prctl(4, 1, 0, 0, 0)  # dumpable again, as in a fresh jail (/proc/self readable)
            os._exit(run_main(request["code"], os.path.join(WORK, "main.py")))  # noqa: F821 - defined by _archive.py, sent to the jail before this file
        argv = request["argv"]
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it; exec'd programs must not
        os.execvpe(argv[0], argv, dict(os.environ))
    except BaseException:  # noqa: BLE001 - any failure is reported to the host, never the worker's silent end
        try:
            traceback.print_exc()
        finally:
            os._exit(127)


def restore(request):
    """Restore the run's work dir from the frames that follow its request on the protocol pipe, a piece at
    a time (memory for one piece, never the archive). If it fails, what is left of the request is dropped,
    so that the next run reads its own from its start, and the worker is told why: the state's fault,
    unless the host finds otherwise."""
    files = Stream(PROTOCOL_IN, request["files_size"])  # noqa: F821 - from _archive.py
    try:
        if request["files_size"]:
            unpack_frames(files, WORK)  # noqa: F821 - from _archive.py
    except Exception as error:  # noqa: BLE001 - whatever stops the restore is reported, never the worker's end
        null = os.open("/dev/null", os.O_WRONLY)
        splice_into(null, files.left + request["stdin_size"])
        reason = "%s: %s" % (type(error).__name__, error)
        raise Restore(reason[-500:]) from None


class Restore(Exception):
    """The run's work dir could not be restored (the reason is the message)."""


def stdin_file(size):
    """The run's stdin: the ``size`` bytes that follow its request on the protocol pipe, moved by the
    kernel (splice) into a file without a name. They never enter this process's memory, which the
    program inherits and may fork: python_tests' runner forks the candidate's process before it reads
    its stdin (the tests), and relies on that process finding no trace of them."""
    fd = os.open("/tmp", os.O_TMPFILE | os.O_RDWR, 0o600)
    left = splice_into(fd, size)
    if left:  # /tmp is full: drop the rest, so that the next run reads its request from its start
        null = os.open("/dev/null", os.O_WRONLY)
        splice_into(null, left)
        raise OSError("the run's stdin (%d bytes) does not fit in /tmp" % size)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def splice_into(fd, size):
    """Move ``size`` bytes from the protocol pipe to ``fd`` in the kernel; how many are left where
    ``fd`` refuses them or the pipe ends."""
    try:
        while size:
            if hasattr(os, "splice"):
                moved = os.splice(PROTOCOL_IN, fd, size)
            else:  # Python < 3.10
                moved = LIBC.splice(PROTOCOL_IN, None, fd, None, ctypes.c_size_t(size), 0)
            if moved <= 0:
                break
            size -= moved
    except OSError:
        pass
    return size


def limit(kind, value):
    resource.setrlimit(kind, (value, value))


class Outputs:
    """Where the worker collects a run's stdout and stderr: one buffer, reused and zeroed after every
    run, so that no byte of a run stays in the memory that the next run's fork inherits."""

    def __init__(self):
        self.buffer, self.size, self.used = bytearray(), 0, [0, 0]

    def prepare(self, cap):
        if self.size < cap + CHUNK:
            self.size = cap + CHUNK
            self.buffer = bytearray(2 * self.size)  # the old one was wiped after its run
        self.used = [0, 0]

    def read(self, which, fd):
        """Read what ``fd`` has into stream ``which`` (0 stdout, 1 stderr); 0 at its end."""
        start = which * self.size + self.used[which]
        end = min(start + CHUNK, (which + 1) * self.size)
        with memoryview(self.buffer) as view:
            count = os.readv(fd, [view[start:end]]) if end > start else len(os.read(fd, CHUNK))
        self.used[which] += count if end > start else 0
        return count

    def view(self, which, size):
        return memoryview(self.buffer)[which * self.size : which * self.size + size]

    def total(self):
        return self.used[0] + self.used[1]

    def wipe(self):
        """Zero what the last run wrote (only that: a full buffer is megabytes)."""
        for which, used in enumerate(self.used):
            start = which * self.size
            self.buffer[start : start + used] = bytes(used)
        self.used = [0, 0]


def supervise(pid, out_read, err_read, start, outputs):
    """Collect output until the run exits; kill its session at the deadline or past the output cap."""
    begin = time.monotonic()
    deadline = begin + start["wall_s"]
    cap = start["max_output"]
    outputs.prepare(cap)
    streams = {out_read: 0, err_read: 1}
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
            break  # the run is over; what its leftovers write later does not count
        for fd in ready:
            if not outputs.read(streams[fd], fd):
                open_fds.remove(fd)
            elif outputs.total() > cap and not capped:
                capped = True
                kill_session(pid)
    if status is None:
        _, status, usage = os.wait4(pid, 0)
    for fd in (out_read, err_read):
        os.close(fd)
    return {
        "exit_code": os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status,
        "wall_s": time.monotonic() - begin,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "max_rss_kb": usage.ru_maxrss,
        "timed_out": timed_out,
        "output_capped": capped,
        "stdout": min(outputs.used[0], cap),
        "stderr": min(outputs.used[1], cap),
        "files": bool(start["keep_files"]),
    }


def kill_session(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def send_files(cap):
    """The work dir, packed by a fresh fork (its memory, holding the files, goes with it), or why it cannot
    be kept when it passes ``cap`` bytes."""
    began_read, began_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(began_read)
            data = packed(WORK, cap)  # noqa: F821 - from _jailpy.py
            os.write(began_write, b"w")
            write_all(PROTOCOL_OUT, struct.pack(">I", len(data)) + data)  # noqa: F821 - defined by _archive.py, sent to the jail before this file
        finally:
            os._exit(0)
    os.close(began_write)
    began = read_all(began_read)  # noqa: F821 - until the packer exits
    _, status = os.waitpid(pid, 0)
    if not began:
        data = failed_frames("the work dir could not be packed (exit status %d)" % status)  # noqa: F821 - defined by _archive.py, sent to the jail before this file
        write_all(PROTOCOL_OUT, struct.pack(">I", len(data)) + data)  # noqa: F821 - defined by _archive.py, sent to the jail before this file
    elif status != 0:
        os._exit(70)  # it died halfway through its message: the protocol is lost, the host replaces us


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
