"""Python that runs inside jails (stdlib only, Python 3.8+), after _archive.py (whose codec it uses):
running code as __main__, moving a work dir in and out, and the entry point of fresh-jail Python runs.
The warm pool's worker is built on it too."""

import builtins
import io
import os
import sys


def run_main(code, path):
    """Run ``code`` as the __main__ module saved at ``path``; return its exit status (0-255)."""
    with open(path, "w") as main_file:
        main_file.write(code)
    directory = os.path.dirname(path)
    sys.argv = [os.path.basename(path)]
    sys.path.insert(0, directory)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    module = type(sys)("__main__")
    module.__dict__.update({"__file__": path, "__builtins__": builtins})
    sys.modules["__main__"] = module
    try:
        exec(compile(code, path, "exec"), module.__dict__)
        status = 0
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not isinstance(exit_.code, (int, type(None))):
            print(exit_.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the program's own failure: printed, as python would
        import traceback  # costs milliseconds: only when there is a traceback to print

        kind, value, trace = sys.exc_info()
        traceback.print_exception(kind, value, trace.tb_next)  # from main.py on, without this frame
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a stream the program closed: nothing left to flush
            pass
    return status & 0xFF


def read_all(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            os.close(fd)
            return b"".join(chunks)
        chunks.append(chunk)


def write_all(fd, data):
    data = memoryview(data)
    while data:
        data = data[os.write(fd, data) :]


RESTORING = b"verihub-restoring\n"  # on the control pipe before the work dir is restored, then "verihub-started"


def packed(directory, cap):
    """The work dir as frames, or (past the codec's bounds or ``cap`` bytes, or unreadable) the reason it
    cannot be kept."""
    try:
        data = to_frames(pack(directory))  # noqa: F821 - from _archive.py
    except (UnsafeArchive, OSError, MemoryError) as error:  # noqa: F821 - defined by _archive.py, sent to the jail before this file
        return failed_frames(str(error) or type(error).__name__)  # noqa: F821 - defined by _archive.py, sent to the jail before this file
    if len(data) > cap:
        return failed_frames(  # noqa: F821 - defined by _archive.py, sent to the jail before this file
            f"its archive takes {len(data) >> 20} MiB, more than the {cap >> 20} MiB a work dir of this size "
            "sends back (sparse files in full)"
        )
    return data


def bootstrap():
    """Fresh jail, Python run: argv is [inbound fd, control fd, keep files (0/1), soft CPU seconds, the
    most bytes of frames to send back]; main.py comes with the files (as frames), read a piece at a time.
    The control pipe gets the restore and start markers, and the packed files at the end."""
    inbound, control, keep, cpu = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])
    os.write(control, RESTORING)
    unpack_frames(Stream(inbound), "/work")  # noqa: F821 - from _archive.py
    os.close(inbound)
    os.write(control, b"verihub-started\n")
    if not keep:
        os.close(control)
    with open("/work/main.py") as main_file:
        code = main_file.read()
    # The code runs in a child: as the jail's pid 1 it would ignore signals it sends itself.
    child = os.fork()
    if child == 0:
        if keep:
            os.close(control)
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (cpu, resource.getrlimit(resource.RLIMIT_CPU)[1]))
        os._exit(run_main(code, "/work/main.py"))
    _, wait_status = os.waitpid(child, 0)
    status = 128 + os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else os.WEXITSTATUS(wait_status)
    if keep:
        write_all(control, packed("/work", int(sys.argv[5])))
    os._exit(status)
