"""Fault forcing: answers sized and shaped to push every limit of the grading path, for every environment.

A wrong answer that makes a grade ``env_error`` or ``timeout`` escapes its penalty; :mod:`verihub.grading.faults`
makes such a fault the answer's when the task's reference does not share it, and these exploits check that
it holds for the environment at hand. Each builds its answer in the environment's own answer form: the gold
reference's template with every placeholder replaced by the hostile payload (``\\boxed{...}``, a ``python``
block, a ``json`` block, plain text), sized to the environment's ``max_answer_chars`` (one just past it), so
what reaches the checks is the largest input the edge admits. Sandboxed environments also get final work
dirs at the sandbox's own limits (many files, deep trees, a file near the disk size).

:data:`SHAPES` are the payload shapes; :mod:`verihub.validation.growth` also grades them at doubling sizes to
find a step whose time grows faster than the answer (a super-linear step in an environment's own code,
found without knowing its pattern).
"""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from verihub.checks.exploit import Attempt, Exploit, Family

if TYPE_CHECKING:
    from verihub.spec.models import EnvSpec

__all__ = ["SHAPES", "exploits", "in_answer_form"]

# payload shapes: size -> text of that many characters (built to be wrong for any task)
SHAPES: dict[str, Callable[[int], str]] = {
    "nested": lambda n: "[{(" * (n // 6) + ")}]" * (n // 6),  # recursion in parsers
    "digits": lambda n: "9" * n,  # int conversion limits
    "open-delimiters": lambda n: _repeat('\\boxed{ <answer> ```{ [ ("x ', n),  # scans that restart at each opener
    "astral": lambda n: "\U0001f600" * n,  # 4 bytes in UTF-8, 12 escaped as JSON: byte bounds on the way
    "expanding": lambda n: "\ufdfa" * n,  # one character that Unicode normalization turns into 18
    "compatibility-words": lambda n: "\u3316" * n,  # one that NFKC spells as six (キロメートル)
    "combining-marks": lambda n: _repeat("\u0301\u0316", n),  # one run of marks, out of order: NFC sorts it
    "whitespace-run": lambda n: "x" + " " * (n - 2) + "x",  # backtracking over \s* or trailing-space patterns
    "punctuation-run": lambda n: "x" + "." * (n - 2) + "x",  # a [.,;]+$ that retries from every dot
    "repeated-tags": lambda n: _repeat("<answer>x", n),  # a lazy .*? per tag: quadratic
    "many-lines": lambda n: _repeat("0\n", n),  # per-line work
}
_MARGIN = 64  # characters kept under the limit for the form's own text, whatever it holds


def exploits(spec: EnvSpec) -> tuple[Exploit, ...]:
    """The fault-forcing exploits for an environment of ``spec``."""
    limit = spec.max_answer_chars
    found = [
        Exploit(
            "past-the-answer-limit",
            Family.FAULT_FORCING,
            f"a {limit + 1:,}-character answer, one past max_answer_chars",
            _sized(spec, "digits", limit + 1),
            tasks=1,
        )
    ]
    found += [
        Exploit(
            f"{shape}-to-the-limit",
            Family.FAULT_FORCING,
            f"the {shape} shape in the environment's answer form, {limit:,} characters in all",
            _sized(spec, shape, limit),
            tasks=1,
        )
        for shape in SHAPES
    ]
    if spec.interaction.sandboxed:
        found += _workdirs(spec)
    return tuple(found)


def in_answer_form(spec: EnvSpec, task: Mapping[str, Any], payload_of: Callable[[int], str], total: int) -> str | None:
    """The gold reference's form for ``task`` with each placeholder a payload, about ``total`` characters in
    all; None when the template has no placeholder or does not fit the task."""
    template = spec.gold.reference
    fields = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    if not fields:
        return None
    try:
        frame = len(template.format_map({name: "" for name in fields}))
    except (KeyError, IndexError, ValueError, AttributeError):
        return None
    each = max(1, (total - frame) // len(fields))
    payload = payload_of(each)
    try:
        return template.format_map({name: payload for name in fields})
    except (KeyError, IndexError, ValueError, AttributeError):
        return None


def _sized(spec: EnvSpec, shape: str, total: int) -> Callable[[Mapping[str, Any], Any], str | None]:
    payload_of = SHAPES[shape]
    size = total if total > spec.max_answer_chars else total - _MARGIN

    def build(task: Mapping[str, Any], params: Any) -> str | None:
        built = in_answer_form(spec, task, payload_of, size)
        if built is None:
            return None
        if total > spec.max_answer_chars and len(built) <= spec.max_answer_chars:  # the form ate the margin
            built += " " * (spec.max_answer_chars + 1 - len(built))
        return built

    return build


def _workdirs(spec: EnvSpec) -> list[Exploit]:
    """Final work dirs at the sandbox's limits: what a terminal-state grade snapshots and restores."""
    from verihub.sandbox._archive import MAX_DEPTH, MAX_ENTRIES

    disk = spec.sandbox.disk_mb << 20
    file_bytes = min(spec.sandbox.max_file_mb << 20, disk // 2)
    states: dict[str, tuple[str, Callable[[], dict[str, str]]]] = {
        "many-files": (
            f"{MAX_ENTRIES // 2:,} empty files in the work dir",
            lambda: {f"f{index}": "" for index in range(MAX_ENTRIES // 2)},
        ),
        "deep-tree": (f"a file {MAX_DEPTH - 8} directories deep", lambda: {"d/" * (MAX_DEPTH - 8) + "f": "x"}),
        "large-file": (
            f"a file of {file_bytes >> 20} MiB (half the disk, within the file-size limit)",
            lambda: {"large.txt": "0" * file_bytes},
        ),
    }

    def attempt(state: Callable[[], dict[str, str]]) -> Callable[[Mapping[str, Any], Any], Attempt]:
        return lambda task, params: Attempt("Done.", workdir=state())

    return [
        Exploit(f"workdir-{name}", Family.FAULT_FORCING, f"'Done.', leaving {description}", attempt(state), tasks=1)
        for name, (description, state) in states.items()
    ]


def _repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]
