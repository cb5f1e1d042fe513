"""Generate envs/math-word/data/problems.jsonl: templated math word problems with exact answers.

Numbers come from a seeded ``random.Random``; answers are exact ``fractions.Fraction`` values. Each row also carries a
plausible wrong answer (a forgotten or misapplied step), and math-verify checks both before the file is written.
Regenerate (deterministic, overwrites the file) with: ``python envs/math-word/scripts/make_data.py``
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable
from fractions import Fraction as F
from pathlib import Path

SEED = 20261130
PER_DIFFICULTY = 84
OUT_PATH = Path(__file__).resolve().parent.parent / "data" / "problems.jsonl"

NAMES = [
    "Maya",
    "Theo",
    "Priya",
    "Jonas",
    "Lena",
    "Omar",
    "Ines",
    "Kofi",
    "Rosa",
    "Felix",
    "Anya",
    "Diego",
    "Mei",
    "Tobias",
    "Zara",
    "Hugo",
    "Nadia",
    "Ravi",
    "Elsa",
    "Idris",
]
ITEMS = ["notebooks", "pencils", "apples", "stickers", "muffins", "marbles", "postcards", "candles"]

Problem = tuple[str, F, F]  # (question, exact answer, plausible wrong answer)
Template = Callable[[random.Random], Problem]


def fmt(x: F) -> str:
    """Render an exact value as an integer, a decimal with at most 4 places, or a LaTeX fraction."""
    if x.denominator == 1:
        return str(x.numerator)
    if 10_000 % x.denominator == 0:  # terminates within 4 decimal places, so this is exact
        whole, rest = divmod(x.numerator * (10_000 // x.denominator), 10_000)
        return f"{whole}.{rest:04d}".rstrip("0")
    return f"\\frac{{{x.numerator}}}{{{x.denominator}}}"


# ---------------------------------------------------------------- difficulty 1
def buy_items(r: random.Random) -> Problem:
    n, p, who, it = r.randint(3, 15), r.randint(2, 12), r.choice(NAMES), r.choice(ITEMS)
    return f"{who} buys {n} {it} that cost ${p} each. How many dollars does {who} spend?", F(n * p), F((n - 1) * p)


def avg_speed(r: random.Random) -> Problem:
    t, d = r.randint(2, 6), r.randint(12, 60) * 5
    q = f"A train covers {d} kilometers in {t} hours at a steady pace. What is its speed in kilometers per hour?"
    return q, F(d, t), F(d * t)


def fraction_of(r: random.Random) -> Problem:
    b = r.randint(3, 8)
    a, n = r.randint(2, b - 1), b * r.randint(4, 12)
    q = f"A class has {n} students, and {a}/{b} of them walk to school. How many students walk to school?"
    return q, F(n * a, b), F(n, b)


def meters_to_cm(r: random.Random) -> Problem:
    m = F(r.randint(11, 99), 10)
    return f"A ribbon is {fmt(m)} meters long. How long is it in centimeters?", m * 100, m * 10


def percent_of(r: random.Random) -> Problem:
    p, n = r.choice([5, 10, 15, 20, 25, 30, 40, 60, 75]), r.randint(4, 40) * 10
    q = f"A library owns {n} books and {p}% of them are mystery novels. How many mystery novels does it own?"
    return q, F(n * p, 100), F(n * p, 10)


def rect_perimeter(r: random.Random) -> Problem:
    ln, w = r.randint(6, 30), r.randint(2, 12)
    q = f"A rectangular garden is {ln} meters long and {w} meters wide. What is its perimeter in meters?"
    return q, F(2 * (ln + w)), F(ln + w)


def share_equally(r: random.Random) -> Problem:
    k, who = r.randint(3, 8), r.choice(NAMES)
    n = r.randint(k + 1, 4 * k)
    q = f"{who} shares {n} pizzas equally among {k} friends. How many pizzas does each friend get?"
    return q, F(n, k), F(n, k + 1)


# ---------------------------------------------------------------- difficulty 2
def discount_price(r: random.Random) -> Problem:
    p, d = r.randint(4, 40) * 5, r.choice([10, 15, 20, 25, 30, 35, 40])
    q = f"A jacket costs ${p}, and the store offers {d}% off. What is the sale price in dollars?"
    return q, F(p) * (1 - F(d, 100)), F(p * d, 100)


def age_multiple(r: random.Random) -> Problem:
    (a, b), m, age, k = r.sample(NAMES, 2), r.randint(2, 4), r.randint(3, 12), r.randint(2, 10)
    q = f"{a} is {m} times as old as {b}, who is {age} years old. How old will {a} be in {k} years?"
    return q, F(m * age + k), F(m * age)


def test_average(r: random.Random) -> Problem:
    s = [r.randint(60, 100) for _ in range(r.randint(3, 5))]
    listed = ", ".join(map(str, s[:-1])) + f" and {s[-1]}"
    q = f"{r.choice(NAMES)} scored {listed} on {len(s)} quizzes. What is the average score?"
    return q, F(sum(s), len(s)), F(sum(s), len(s) - 1)


def simple_interest(r: random.Random) -> Problem:
    p, rate, t = r.randint(2, 50) * 100, r.choice([2, 3, 4, 5, 6, 8]), r.randint(2, 6)
    q = f"A deposit of ${p} earns {rate}% simple interest per year. How many dollars of interest accrue in {t} years?"
    return q, F(p * rate * t, 100), F(p * rate, 100)


def change_back(r: random.Random) -> Problem:
    n, p, who, it = r.randint(2, 6), F(r.randint(5, 30), 4), r.choice(NAMES), r.choice(ITEMS)
    bill = r.choice([20, 50]) if n * p < 20 else 50
    q = f"{who} buys {n} {it} at ${float(p):.2f} each and pays with a ${bill} bill. How many dollars of change are due?"
    return q, bill - n * p, bill - p


def travel_minutes(r: random.Random) -> Problem:
    v, d = r.choice([30, 40, 45, 50, 60, 80]), r.randint(5, 40) * 5
    q = f"A bus travels {d} kilometers at {v} kilometers per hour. How many minutes does the trip take?"
    return q, F(d, v) * 60, F(d, v)


def ratio_share(r: random.Random) -> Problem:
    a, b = r.sample(range(1, 8), 2)
    n = (a + b) * r.randint(3, 10)
    q = f"A club has {n} members, and the ratio of adults to children is {a}:{b}. How many children are in the club?"
    return q, F(n * b, a + b), F(n * a, a + b)


def kmh_to_ms(r: random.Random) -> Problem:
    v = r.randint(4, 30) * 6
    q = f"A cheetah runs at {v} kilometers per hour. What is that speed in meters per second?"
    return q, F(v * 1000, 3600), F(v * 1000, 60)


# ---------------------------------------------------------------- difficulty 3
def work_together(r: random.Random) -> Problem:
    (a, b), (x, y) = r.sample(range(2, 13), 2), r.sample(NAMES, 2)
    q = f"{x} can paint a fence in {a} hours and {y} can paint it in {b} hours. Together, how many hours do they need?"
    return q, F(a * b, a + b), F(a + b, 2)


def interest_total(r: random.Random) -> Problem:
    p, rate, t = r.randint(5, 80) * 50, r.choice([3, 4, 5, 6, 7]), r.randint(2, 5)
    q = (
        f"{r.choice(NAMES)} invests ${p} at {rate}% simple interest per year. What is the total amount, in dollars, "
        f"after {t} years?"
    )
    return q, p + F(p * rate * t, 100), F(p * rate * t, 100)


def two_discounts(r: random.Random) -> Problem:
    p, d1, d2 = r.randint(8, 60) * 10, r.choice([10, 20, 25, 30]), r.choice([5, 10, 15, 20])
    q = (
        f"A bike costs ${p}. It is marked down {d1}%, and then a coupon takes {d2}% off the reduced price. "
        "What is the final price in dollars?"
    )
    return q, p * (1 - F(d1, 100)) * (1 - F(d2, 100)), p * (1 - F(d1 + d2, 100))


def needed_score(r: random.Random) -> Problem:
    n, cur = r.randint(3, 6), r.randint(70, 78)
    goal = r.randint(cur + 1, cur + 3)
    q = f"{r.choice(NAMES)} averages {cur} on {n} tests. What score on the next test raises the average to {goal}?"
    return q, F(goal * (n + 1) - cur * n), F(2 * goal - cur)


def age_sum(r: random.Random) -> Problem:
    (a, b), young, gap, k = r.sample(NAMES, 2), r.randint(4, 30), r.randint(2, 12), r.randint(3, 10)
    q = (
        f"The ages of {a} and {b} add up to {2 * young + gap}, and {a} is {gap} years older than {b}. "
        f"How old will {b} be in {k} years?"
    )
    return q, F(young + k), F(young)


def trip_average(r: random.Random) -> Problem:
    v1, v2 = r.sample([30, 40, 45, 50, 60, 75, 90], 2)
    d1, d2 = v1 * r.randint(1, 3), v2 * r.randint(1, 3)
    q = f"A driver goes {d1} km at {v1} km/h, then {d2} km at {v2} km/h. What is the average speed in km/h?"
    return q, F(d1 + d2, F(d1, v1) + F(d2, v2)), F(v1 + v2, 2)


def money_left(r: random.Random) -> Problem:
    a, b, who = r.randint(3, 6), r.randint(2, 5), r.choice(NAMES)
    m = a * b * r.randint(2, 12)
    q = f"{who} has ${m}, spends 1/{a} of it on books, then 1/{b} of what remains on lunch. How many dollars are left?"
    return q, m * (1 - F(1, a)) * (1 - F(1, b)), m * (1 - F(1, a) - F(1, b))


def paint_wall(r: random.Random) -> Problem:
    ln, h, wb, c = r.randint(4, 12), r.randint(2, 4), r.randint(1, 2), r.randint(4, 10)
    q = (
        f"A wall is {ln} m long and {h} m high with a 1 m by {wb} m window. One liter of paint covers {c} square "
        "meters. How many liters are needed for the wall?"
    )
    return q, F(ln * h - wb, c), F(ln * h, c)


TEMPLATES: dict[int, list[Template]] = {
    1: [buy_items, avg_speed, fraction_of, meters_to_cm, percent_of, rect_perimeter, share_equally],
    2: [
        discount_price,
        age_multiple,
        test_average,
        simple_interest,
        change_back,
        travel_minutes,
        ratio_share,
        kmh_to_ms,
    ],
    3: [work_together, interest_total, two_discounts, needed_score, age_sum, trip_average, money_left, paint_wall],
}


def family(template: Template, question: str, answer: F) -> str:
    """A problem up to its equivalents: the template, the multiset of its numbers and the answer (names,
    items, the order of a trip's legs or of "7 items at $11" and "11 items at $7" do not change the
    problem). The spec's ``group_by`` keeps a family in one split."""
    numbers = sorted(re.findall(r"\d+(?:\.\d+)?", question), key=lambda n: (float(n), n))
    return f"{template.__name__}:{','.join(numbers)}={fmt(answer)}"


def generate(rng: random.Random) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    seen: set[str] = set()
    for difficulty, templates in TEMPLATES.items():
        made = 0
        while made < PER_DIFFICULTY:
            question, answer, wrong = templates[made % len(templates)](rng)
            if question in seen or answer <= 0 or wrong <= 0 or wrong == answer:
                continue  # redraw; round-robin index stays on the same template
            seen.add(question)
            rows.append(
                {
                    "question": question,
                    "answer": fmt(answer),
                    "difficulty": difficulty,
                    "wrong_answer": fmt(wrong),
                    "family": family(templates[made % len(templates)], question, answer),
                }
            )
            made += 1
    rng.shuffle(rows)
    return [{"id": f"mw-{i:04d}", **row} for i, row in enumerate(rows, start=1)]


def verify_rows(rows: list[dict[str, object]]) -> list[str]:
    from math_verify import parse, verify  # imported lazily: slow to import, only needed here

    failures = []
    for row in rows:
        gold = parse(f"${row['answer']}$")
        ok = verify(gold, parse(f"The answer is $\\boxed{{{row['answer']}}}$"))
        bad = verify(gold, parse(f"The answer is $\\boxed{{{row['wrong_answer']}}}$"))
        if not ok or bad:
            failures.append(f"{row['id']}: answer ok={ok}, wrong accepted={bad}")
    return failures


def main() -> None:
    rows = generate(random.Random(SEED))
    failures = verify_rows(rows)
    if failures:
        raise SystemExit("math-verify check failed:\n" + "\n".join(failures))
    OUT_PATH.parent.mkdir(parents=True, exist_ok=True)
    with OUT_PATH.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts = Counter(row["difficulty"] for row in rows)
    print(f"wrote {len(rows)} rows to {OUT_PATH}; per difficulty: {dict(sorted(counts.items()))}")
    print(f"math-verify: all {len(rows)} answers accepted, all wrong answers rejected")


if __name__ == "__main__":
    main()
