"""Every built-in inline check runs in time linear in the answer, on every fault-forcing shape: graded at a
quarter of the largest answer the edge admits and at all of it, none grows past a quarter second, or else
grows no faster than the answer does (a quadratic step, such as a regex ``[.\\s]+$`` retried from each dot of
a run, takes seconds there). Past the edge limit too (a check may be called by code of its own), and on
Unicode built to make normalization quadratic (a long run of combining marks out of order)."""

from __future__ import annotations

from time import perf_counter
from typing import Any

import pytest

from conftest import REPO
from verihub.checks._unicode import compatibility_fold, fold
from verihub.checks.attacks.faults import SHAPES
from verihub.checks.registry import BUILTIN_CHECKS
from verihub.grading.verifier import BoundLayer, Verifier
from verihub.spec.models import MAX_ANSWER_CHARS, LayerSpec

ARGS: dict[str, dict[str, Any]] = {  # what the checks that need arguments are given
    "regex": {"pattern": r"\d+"},
    "contains": {"patterns": ["answer"]},
    "forbidden": {"patterns": ["As an AI"]},
    "json_schema": {"schema": {"type": "object"}},
    "json_fields": {"field": "expected"},
    "xml_tags": {"tags": ["answer"]},
    "multiple_choice": {"choices": "ABCD"},
    "length": {"max_chars": 10_000_000},
}
TASK = {"id": "t", "answer": "4", "expected": '{"a": 1}', "letter": "C"}
INLINE = sorted(name for name, check in BUILTIN_CHECKS.items() if check.mode == "inline")
FLOOR_S = 0.25


def seconds(verifier: Verifier, text: str) -> float:
    best = float("inf")
    for _ in range(2):
        start = perf_counter()
        verifier.grade(TASK, text)
        best = min(best, perf_counter() - start)
    return best


@pytest.mark.parametrize("name", INLINE)
def test_each_built_in_check_is_linear_on_every_shape(name: str) -> None:
    spec = LayerSpec(name=name, layer="check", use=name, args=ARGS.get(name, {}), timeout_s=600)
    verifier = Verifier([BoundLayer.from_spec(spec, REPO)], cache_size=0)
    grown = {}
    for shape, payload_of in SHAPES.items():
        quarter, full = (
            f"The answer is \\boxed{{{payload_of(size)}}}" for size in (MAX_ANSWER_CHARS // 4, MAX_ANSWER_CHARS)
        )
        at_quarter, at_full = seconds(verifier, quarter), seconds(verifier, full)
        if at_full > FLOOR_S and at_full > 8 * max(at_quarter, 1e-3):  # linear: 4x; quadratic: 16x
            at_quarter, at_full = seconds(verifier, quarter), seconds(verifier, full)  # again, before it counts
            if at_full > FLOOR_S and at_full > 8 * max(at_quarter, 1e-3):
                grown[shape] = (round(at_quarter, 3), round(at_full, 3))
    assert not grown, f"{name} grows faster than the answer on {grown}"


@pytest.mark.parametrize("read", [fold, compatibility_fold])
def test_folding_a_megabyte_of_marks_words_or_wide_forms_takes_a_fraction_of_a_second(read: Any) -> None:
    for text in (
        "a" + "\u0301\u0316" * 500_000,
        "a" + "\u0301\u200d\u0316" * 330_000,
        "\u3316" * 1_000_000,
        "\ufdfa" * 1_000_000,
        "\uff11" * 1_000_000,
    ):
        start = perf_counter()
        read(text)
        assert perf_counter() - start < 2.0, (read.__name__, text[:3])


def test_a_run_of_marks_is_cut_at_thirty_and_folding_still_reads_what_it_did() -> None:
    assert fold("e\u0301") == "\u00e9" and fold("x\u200b5\uff15") == "x55"
    assert fold("a" + "\u0301" * 40) == "\u00e1" + "\u0301" * 29  # stream-safe: 30 marks on one letter
    assert compatibility_fold("\uff21s an \ufb01ne AI \u2460") == "As an fine AI 1"
    assert compatibility_fold("q\u1fed.") == "q \u0308\u0300."  # a compatibility form inside a canonical one
    assert fold(fold("a" + "\u0301\u200d" * 40)) == fold("a" + "\u0301\u200d" * 40)


def test_the_code_python_tests_extracts_is_found_in_linear_time_on_every_shape() -> None:
    """python_tests runs in the jail, but finds the answer's last code block on the host: a regex from every
    ``` opener to the end of its line was quadratic on a line of openers (0.1 s a grade at 80,000 characters)."""
    from verihub.checks.code import _candidate

    def took(text: str) -> float:
        best = float("inf")
        for _ in range(2):
            start = perf_counter()
            _candidate(text, "code_block")
            best = min(best, perf_counter() - start)
        return best

    grown = {}
    for shape, payload_of in SHAPES.items():
        sizes = (MAX_ANSWER_CHARS, 4 * MAX_ANSWER_CHARS)  # past the edge limit: the old regex took 1.6 s at 320,000
        quarter, full = (f"```python\n{payload_of(size)}" for size in sizes)
        at_quarter, at_full = took(quarter), took(full)
        if at_full > FLOOR_S and at_full > 8 * max(at_quarter, 1e-3):
            grown[shape] = (round(at_quarter, 3), round(at_full, 3))
    assert not grown, f"code extraction grows faster than the answer on {grown}"
    assert _candidate("intro\n```python\nx = 1\n```\nthen\n```py\ny = 2\n```", "code_block") == "y = 2\n"
    assert _candidate("``` not closed\nx = 1", "code_block") is None
