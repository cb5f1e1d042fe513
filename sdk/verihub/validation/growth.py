"""Growth probing: find a step whose time grows faster than its input, without knowing its pattern.

Each fault-forcing shape (:data:`verihub.checks.attacks.faults.SHAPES`) is graded in the environment's answer
form at ``max_answer_chars``, at half of it and at a few characters, and each layer's time is read from the
grade. What a layer takes beyond its time on the few characters (a sandbox's start, a judge's round trip)
is the part that grows with the answer: a layer where that part passes :data:`FLOOR_S` at the limit and
more than :data:`RATIO` times what it was at half is super-linear there (a linear step doubles, a quadratic
one quadruples), and a longer answer, a slower machine or a tighter limit turns it into a timeout. Times
are the best of two gradings (the cache cleared between; the sizes take turns, so a busy spell slows one
grading of each size, not all of one), and a finding is measured again, best of four, before it counts: a
busy machine must not fail an environment, nor hide a quadratic step.

A terminal-state environment (sandboxed tools) is also probed with final work dirs of hostile shapes
(:data:`WORKDIR_SHAPES`: chained symlinks with long targets, deep paths, many entries) at
:data:`WORKDIR_BYTES`, half of it and a few entries: the host's own check of the work dir the jail hands back
(``(work dir check)``, what every tool call pays before the state becomes a snapshot) and each layer that
grades the state are timed the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from verihub.checks.attacks.faults import SHAPES, in_answer_form
from verihub.grading.grade import LayerStatus

if TYPE_CHECKING:
    from verihub.environment.core import Environment
    from verihub.sandbox._archive import Entry
    from verihub.validation.redteam import ExploitOutcome

__all__ = [
    "FLOOR_S",
    "RATIO",
    "WORKDIR_BYTES",
    "WORKDIR_CHECK",
    "WORKDIR_SHAPES",
    "probe_growth",
    "probe_workdir_growth",
]

FLOOR_S = 0.25  # seconds a layer may grow by at the limit, whatever its curve, before its curve matters
RATIO = 3.0  # time at the largest size over time at half of it: 2 for a linear step, 4 for a quadratic one
WORKDIR_BYTES = 512 << 10  # the largest work dir probed, in archive bytes (a cubic walk took minutes on 400 KB)
WORKDIR_CHECK = "(work dir check)"  # the host's check of a work dir a jail sent back, timed like a layer
_BASE = 8  # characters of payload in the smallest answer: the layer's cost that does not grow
_RAN = (LayerStatus.PASSED, LayerStatus.FAILED, LayerStatus.ANSWER_FAULT, LayerStatus.TIMEOUT, LayerStatus.ERROR)

Times = dict[str, float]


def probe_growth(env: Environment, task: Mapping[str, Any], target: str) -> list[ExploitOutcome]:
    """One outcome per shape: ``fault`` where a layer's time grows super-linearly on it, else ``blocked``."""
    limit = env.spec.max_answer_chars
    outcomes = []
    for shape, payload_of in SHAPES.items():
        completions = [in_answer_form(env.spec, task, payload_of, size) for size in (_BASE, limit // 2, limit)]
        description = f"the {shape} shape at {limit // 2:,} and {limit:,} characters: each layer's time"
        graders = None
        if all(completion is not None for completion in completions):
            graders = [_text_grader(env, task, completion) for completion in completions]  # type: ignore[arg-type]  # no None left
        outcomes.append(_probe(f"growth-{shape}", description, target, graders, limit, "characters"))
    if env.spec.interaction.sandboxed:
        outcomes += probe_workdir_growth(env, task, target)
    return outcomes


def probe_workdir_growth(env: Environment, task: Mapping[str, Any], target: str) -> list[ExploitOutcome]:
    """One outcome per work dir shape (:data:`WORKDIR_SHAPES`), for a terminal-state environment: ``fault``
    where the host's check of the work dir or a layer grading it grows super-linearly, else ``blocked``."""
    outcomes = []
    for shape, entries_of in WORKDIR_SHAPES.items():
        description = (
            f"final work dirs of {shape} at {WORKDIR_BYTES // 2:,} and {WORKDIR_BYTES:,} bytes: the host's "
            "check of each and each layer's time"
        )
        graders = [_workdir_grader(env, task, entries_of(size)) for size in (0, WORKDIR_BYTES // 2, WORKDIR_BYTES)]
        outcomes.append(_probe(f"growth-workdir-{shape}", description, target, graders, WORKDIR_BYTES, "bytes"))
    return outcomes


def _probe(
    name: str, description: str, target: str, graders: list[Callable[[], Times]] | None, limit: int, unit: str
) -> ExploitOutcome:
    from verihub.validation.redteam import ExploitOutcome

    if graders is None:
        return ExploitOutcome(name, "fault-forcing", target, description, "not_applicable")
    found = ""
    for repeats in (2, 4):  # a finding is measured again before it counts
        base, half, full = _layer_times(graders, repeats)
        found = _super_linear(base, half, full, limit, unit)
        if not found:
            break
    outcome = ExploitOutcome(name, "fault-forcing", target, description, "fault" if found else "blocked")
    outcome.error = found
    return outcome


def _text_grader(env: Environment, task: Mapping[str, Any], completion: str) -> Callable[[], Times]:
    def grade() -> Times:
        env.verifier.clear_cache()
        return {
            layer.name: layer.time_s for layer in env.verifier.grade(task, completion).layers if layer.status in _RAN
        }

    return grade


def _workdir_grader(env: Environment, task: Mapping[str, Any], shape: list[Entry]) -> Callable[[], Times]:
    """Times of the host's check of a work dir (the task's files and ``shape``) sent back by a jail, as a
    session makes its snapshot, and of each layer grading it (unless the check refuses it: the answer's)."""
    from time import thread_time

    from verihub.sandbox import _archive
    from verihub.sandbox.tools import task_files, with_workdir
    from verihub.sandbox.types import Snapshot

    frames = _archive.to_frames([*Snapshot.of(task_files(task) or {}).entries(), *shape])

    def grade() -> Times:
        start = thread_time()  # the check's own time, as its limit counts it: a busy machine does not stretch it
        try:
            state = Snapshot.received(frames)
        except _archive.UnsafeArchive:
            state = None  # refused: the answer's, as a session's tool call reports it
        times = {WORKDIR_CHECK: thread_time() - start}
        if state is not None:
            env.verifier.clear_cache()
            graded = env.verifier.grade(with_workdir(task, state), "Done.")
            times.update((layer.name, layer.time_s) for layer in graded.layers if layer.status in _RAN)
        return times

    return grade


def _layer_times(graders: list[Callable[[], Times]], repeats: int) -> list[Times]:
    """Each layer's seconds at each size, the best of ``repeats`` gradings. The sizes take turns, so a busy
    spell of the machine slows one grading of each rather than every grading of one."""
    best: list[Times] = [{} for _ in graders]
    for _ in range(repeats):
        for grade, times in zip(graders, best, strict=True):
            for layer, seconds in grade().items():
                times[layer] = min(times.get(layer, float("inf")), seconds)
    return best


def _super_linear(base: Times, half: Times, full: Times, limit: int, unit: str) -> str:
    """Why a layer is super-linear between half the limit and the limit, or ""."""
    for layer, seconds in full.items():
        if layer not in half:
            continue
        floor = base.get(layer, 0.0)
        grown, grown_half = seconds - floor, max(half[layer] - floor, 1e-3)
        if grown > FLOOR_S and grown > RATIO * grown_half:
            return (
                f"layer {layer!r} took {half[layer]:.3f}s at {limit // 2:,} {unit} and {seconds:.3f}s at "
                f"{limit:,} ({grown / grown_half:.1f}x beyond its {floor:.3f}s on a few, for 2x the size): "
                f"super-linear in the answer's size"
            )
    return ""


# -- hostile work dirs, by size in archive bytes (names, targets, headers) -----------------------------

_LINK_PARTS = 790  # "a/" then "../" this many times: a target of about 4 KB, near the kernel's bound


def _link_chain(size: int) -> list[Entry]:
    """Symlinks each leading to the next through a long target that climbs down and back up: resolving
    one link by rejoining the path at every part and again at every hop cost a cubic walk."""
    from verihub.sandbox._archive import SYMLINK, Entry

    count = max(1, size // (5 * _LINK_PARTS + 60))
    climb = "a/" * _LINK_PARTS + "../" * _LINK_PARTS
    return [Entry(f"probe/l{i}", SYMLINK, 0o777, 0.0, f"{climb}l{i + 1}") for i in range(count)]


def _deep_paths(size: int) -> list[Entry]:
    """Files at the bottom of directories 200 deep, each in a tree of its own."""
    from verihub.sandbox._archive import FILE, Entry

    deep = "d/" * 200
    return [Entry(f"probe/t{i}/{deep}f", FILE, 0o644, 0.0, "", b"") for i in range(max(1, size // 450))]


def _many_entries(size: int) -> list[Entry]:
    """Empty files, as many as the size holds."""
    from verihub.sandbox._archive import FILE, Entry

    return [Entry(f"probe/f{i}", FILE, 0o644, 0.0, "", b"") for i in range(max(1, size // 45))]


WORKDIR_SHAPES: dict[str, Callable[[int], list[Entry]]] = {
    "link-chain": _link_chain,
    "deep-paths": _deep_paths,
    "many-entries": _many_entries,
}
"""Work dir shapes for growth probing: size in archive bytes -> entries (under ``probe/``)."""
