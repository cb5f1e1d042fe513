"""Generate envs/code-repair/data/tasks.jsonl: buggy Python functions with hidden unit tests.

Every task is written out here by hand: a correct reference ``fix``, the ``buggy`` code the model sees, a plausible
but still wrong ``wrong_fix``, and pytest-style tests that import the function from ``solution`` (the module the
``python_tests`` check saves the answer as). Before the file is written, each task is checked in a subprocess: the fix
must pass every test, and the buggy code and the wrong fix must each fail at least one.

The tests compare through ``check(got, want)``, which accepts only plain values (numbers, strings, None, and lists,
tuples, sets and dicts of them) of the expected type, so an object whose ``__eq__`` always answers True does not pass.

Regenerate (deterministic, overwrites the file) with: ``python envs/code-repair/scripts/make_data.py``
Check without writing: ``python envs/code-repair/scripts/make_data.py --check``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from pathlib import Path

OUT_PATH = Path(__file__).resolve().parent.parent / "data" / "tasks.jsonl"

HELPERS = """

def _plain(value):
    kind = type(value)
    if kind in (int, float, str, bool, type(None)):
        return True
    if kind in (list, tuple, set, frozenset):
        return all(_plain(item) for item in value)
    if kind is dict:
        return all(_plain(key) and _plain(item) for key, item in value.items())
    return False


def check(got, want):
    assert _plain(got), "returned a %s, not a plain value" % type(got).__name__
    numbers = (int, float)
    assert type(got) is type(want) or (type(got) in numbers and type(want) in numbers), \\
        "returned a %s, want a %s" % (type(got).__name__, type(want).__name__)
    assert got == want, "got %r, want %r" % (got, want)
"""

RAISES = """

def raises(error, function, *args):
    try:
        function(*args)
    except error:
        return
    raise AssertionError("%s%r did not raise %s" % (function.__name__, args, error.__name__))
"""

TASKS: list[dict] = []


def task(
    difficulty: int,
    function: str,
    description: str,
    *,
    fix: str,
    buggy: str,
    wrong: str,
    bug: str,
    tests: dict[str, str],
) -> None:
    """Register one task; ``tests`` maps a test's name (without ``test_``) to its body."""
    body = "".join(
        f"\n\ndef test_{name}():\n{textwrap.indent(textwrap.dedent(code).strip(), '    ')}\n"
        for name, code in tests.items()
    )
    header = f"from solution import {function}\n" + HELPERS + (RAISES if "raises(" in body else "")
    TASKS.append(
        {
            "id": f"cr-{len(TASKS) + 1:03d}",
            "difficulty": difficulty,
            "function": function,
            "description": " ".join(description.split()),
            "buggy_code": textwrap.dedent(buggy).strip() + "\n",
            "tests": header + body,
            "fix": textwrap.dedent(fix).strip() + "\n",
            "wrong_fix": textwrap.dedent(wrong).strip() + "\n",
            "bug": bug,
        }
    )


# ---------------------------------------------------------------------------------------------------------------
# Difficulty 1: one small mistake (off-by-one, wrong operator, wrong value) in a 3-8 line function.
# ---------------------------------------------------------------------------------------------------------------

task(
    1,
    "sum_to_n",
    "Return the sum of the integers 1, 2, ..., n. For n <= 0 return 0.",
    bug="range stops one short",
    buggy="""
        def sum_to_n(n):
            total = 0
            for i in range(1, n):
                total += i
            return total
     """,
    fix="""
        def sum_to_n(n):
            total = 0
            for i in range(1, n + 1):
                total += i
            return total
     """,
    wrong="""
        def sum_to_n(n):
            total = 0
            for i in range(0, n):
                total += i
            return total
     """,
    tests={
        "small": "check(sum_to_n(1), 1)\ncheck(sum_to_n(5), 15)",
        "ten": "check(sum_to_n(10), 55)",
        "non_positive": "check(sum_to_n(0), 0)\ncheck(sum_to_n(-4), 0)",
    },
)

task(
    1,
    "is_even",
    "Return True if the integer n is even and False otherwise (the result must be a bool).",
    bug="tests for odd instead of even",
    buggy="""
        def is_even(n):
            return n % 2 == 1
     """,
    fix="""
        def is_even(n):
            return n % 2 == 0
     """,
    wrong="""
        def is_even(n):
            return 1 - n % 2
     """,
    tests={
        "even": "check(is_even(4), True)\ncheck(is_even(0), True)\ncheck(is_even(-2), True)",
        "odd": "check(is_even(7), False)\ncheck(is_even(-3), False)",
    },
)

task(
    1,
    "factorial",
    "Return n! for an integer n >= 0 (0! is 1).",
    bug="the product starts at 0",
    buggy="""
        def factorial(n):
            result = 0
            for i in range(1, n + 1):
                result *= i
            return result
     """,
    fix="""
        def factorial(n):
            result = 1
            for i in range(1, n + 1):
                result *= i
            return result
     """,
    wrong="""
        def factorial(n):
            result = 1
            for i in range(1, n):
                result *= i
            return result
     """,
    tests={
        "base": "check(factorial(0), 1)\ncheck(factorial(1), 1)",
        "larger": "check(factorial(5), 120)\ncheck(factorial(6), 720)",
    },
)

task(
    1,
    "celsius_to_fahrenheit",
    "Convert a temperature from degrees Celsius to degrees Fahrenheit (F = C * 9/5 + 32).",
    bug="subtracts 32 instead of adding it",
    buggy="""
        def celsius_to_fahrenheit(c):
            return c * 9 / 5 - 32
     """,
    fix="""
        def celsius_to_fahrenheit(c):
            return c * 9 / 5 + 32
     """,
    wrong="""
        def celsius_to_fahrenheit(c):
            return (c + 32) * 9 / 5
     """,
    tests={
        "freezing": "check(celsius_to_fahrenheit(0), 32.0)",
        "boiling": "check(celsius_to_fahrenheit(100), 212.0)",
        "others": "check(celsius_to_fahrenheit(-40), -40.0)\ncheck(celsius_to_fahrenheit(25), 77.0)",
    },
)

task(
    1,
    "last_element",
    "Return the last element of the list xs, or None if the list is empty.",
    bug="indexes one past the end",
    buggy="""
        def last_element(xs):
            if not xs:
                return None
            return xs[len(xs)]
     """,
    fix="""
        def last_element(xs):
            if not xs:
                return None
            return xs[-1]
     """,
    wrong="""
        def last_element(xs):
            return xs[-1]
     """,
    tests={
        "values": "check(last_element([1, 2, 3]), 3)\ncheck(last_element(['a']), 'a')",
        "empty": "check(last_element([]), None)",
    },
)

task(
    1,
    "count_vowels",
    "Count the vowels a, e, i, o, u in the string s, ignoring case. 'y' is not a vowel.",
    bug="uppercase vowels are not counted",
    buggy="""
        def count_vowels(s):
            count = 0
            for ch in s:
                if ch in "aeiou":
                    count += 1
            return count
     """,
    fix="""
        def count_vowels(s):
            count = 0
            for ch in s:
                if ch.lower() in "aeiou":
                    count += 1
            return count
     """,
    wrong="""
        def count_vowels(s):
            count = 0
            for ch in s:
                if ch.lower() in "aeiouy":
                    count += 1
            return count
     """,
    tests={
        "lower": "check(count_vowels('banana'), 3)",
        "mixed_case": "check(count_vowels('AbcdE'), 2)\ncheck(count_vowels('OUT'), 2)",
        "none": "check(count_vowels(''), 0)\ncheck(count_vowels('Rhythm'), 0)",
    },
)

task(
    1,
    "reverse_string",
    "Return the string s reversed.",
    bug="the slice drops the first character",
    buggy="""
        def reverse_string(s):
            return s[-1:0:-1]
     """,
    fix="""
        def reverse_string(s):
            return s[::-1]
     """,
    wrong="""
        def reverse_string(s):
            return s[-1:-len(s):-1]
     """,
    tests={
        "word": "check(reverse_string('hello'), 'olleh')",
        "short": "check(reverse_string('ab'), 'ba')\ncheck(reverse_string('x'), 'x')",
        "empty": "check(reverse_string(''), '')",
    },
)

task(
    1,
    "average",
    "Return the arithmetic mean of the numbers in xs as a float; return 0.0 for an empty list.",
    bug="divides by len - 1",
    buggy="""
        def average(xs):
            if not xs:
                return 0.0
            return sum(xs) / (len(xs) - 1)
     """,
    fix="""
        def average(xs):
            if not xs:
                return 0.0
            return sum(xs) / len(xs)
     """,
    wrong="""
        def average(xs):
            if not xs:
                return 0.0
            return sum(xs) // len(xs)
     """,
    tests={
        "values": "check(average([1, 2, 3, 4]), 2.5)\ncheck(average([2, 4, 6]), 4.0)",
        "single": "check(average([5]), 5.0)",
        "empty": "check(average([]), 0.0)",
    },
)

task(
    1,
    "all_positive",
    "Return True if every number in xs is strictly greater than 0 (True for an empty list).",
    bug="returns as soon as one element is positive",
    buggy="""
        def all_positive(xs):
            for x in xs:
                if x > 0:
                    return True
            return False
     """,
    fix="""
        def all_positive(xs):
            for x in xs:
                if x <= 0:
                    return False
            return True
     """,
    wrong="""
        def all_positive(xs):
            for x in xs:
                if x < 0:
                    return False
            return True
     """,
    tests={
        "yes": "check(all_positive([1, 2, 3]), True)",
        "no": "check(all_positive([1, -2, 3]), False)\ncheck(all_positive([0, 5]), False)",
        "empty": "check(all_positive([]), True)",
    },
)

task(
    1,
    "clamp",
    "Return x limited to the closed range [lo, hi]: lo if x < lo, hi if x > hi, otherwise x. lo <= hi.",
    bug="uses lo where hi belongs",
    buggy="""
        def clamp(x, lo, hi):
            return max(lo, min(x, lo))
     """,
    fix="""
        def clamp(x, lo, hi):
            return max(lo, min(x, hi))
     """,
    wrong="""
        def clamp(x, lo, hi):
            return min(lo, max(x, hi))
     """,
    tests={
        "inside": "check(clamp(5, 0, 10), 5)",
        "below": "check(clamp(-3, 0, 10), 0)",
        "above": "check(clamp(15, 0, 10), 10)\ncheck(clamp(10, 0, 10), 10)",
    },
)

task(
    1,
    "fizzbuzz",
    "Return 'FizzBuzz' if n is divisible by 15, 'Fizz' if by 3, 'Buzz' if by 5, and otherwise n as a string.",
    bug="the divisible-by-3 case is tested before the divisible-by-15 case",
    buggy="""
        def fizzbuzz(n):
            if n % 3 == 0:
                return "Fizz"
            if n % 15 == 0:
                return "FizzBuzz"
            if n % 5 == 0:
                return "Buzz"
            return str(n)
     """,
    fix="""
        def fizzbuzz(n):
            if n % 15 == 0:
                return "FizzBuzz"
            if n % 3 == 0:
                return "Fizz"
            if n % 5 == 0:
                return "Buzz"
            return str(n)
     """,
    wrong="""
        def fizzbuzz(n):
            if n % 15 == 0:
                return "FizzBuzz"
            if n % 3 == 0:
                return "Fizz"
            if n % 5 == 0:
                return "Buzz"
            return n
     """,
    tests={
        "fizz_buzz": "check(fizzbuzz(9), 'Fizz')\ncheck(fizzbuzz(10), 'Buzz')",
        "both": "check(fizzbuzz(15), 'FizzBuzz')\ncheck(fizzbuzz(45), 'FizzBuzz')",
        "number": "check(fizzbuzz(7), '7')",
    },
)

task(
    1,
    "min_index",
    "Return the index of the smallest element of the non-empty list xs; "
    "if the smallest value occurs several times, return the first such index.",
    bug="<= picks the last of equal minima",
    buggy="""
        def min_index(xs):
            best = 0
            for i in range(1, len(xs)):
                if xs[i] <= xs[best]:
                    best = i
            return best
     """,
    fix="""
        def min_index(xs):
            best = 0
            for i in range(1, len(xs)):
                if xs[i] < xs[best]:
                    best = i
            return best
     """,
    wrong="""
        def min_index(xs):
            best = 0
            for i in range(1, len(xs)):
                if xs[i] < xs[i - 1]:
                    best = i
            return best
     """,
    tests={
        "simple": "check(min_index([3, 1, 2]), 1)\ncheck(min_index([7]), 0)",
        "ties": "check(min_index([2, 1, 5, 1]), 1)",
        "dip": "check(min_index([1, 5, 3, 4]), 0)",
    },
)

task(
    1,
    "square_list",
    "Return a new list with the square of every number in xs.",
    bug="doubles instead of squaring",
    buggy="""
        def square_list(xs):
            return [x * 2 for x in xs]
     """,
    fix="""
        def square_list(xs):
            return [x * x for x in xs]
     """,
    wrong="""
        def square_list(xs):
            return [x ^ 2 for x in xs]
     """,
    tests={
        "values": "check(square_list([1, 2, 3]), [1, 4, 9])",
        "negative": "check(square_list([-4, 0]), [16, 0])",
        "empty": "check(square_list([]), [])",
    },
)

task(
    1,
    "power",
    "Return base raised to the integer exponent exp >= 0, computed by repeated multiplication (power(b, 0) is 1).",
    bug="multiplies one time too few",
    buggy="""
        def power(base, exp):
            result = 1
            for _ in range(exp - 1):
                result *= base
            return result
     """,
    fix="""
        def power(base, exp):
            result = 1
            for _ in range(exp):
                result *= base
            return result
     """,
    wrong="""
        def power(base, exp):
            result = base
            for _ in range(exp - 1):
                result *= base
            return result
     """,
    tests={
        "values": "check(power(2, 10), 1024)\ncheck(power(3, 3), 27)",
        "one": "check(power(7, 1), 7)",
        "zero": "check(power(5, 0), 1)",
    },
)

task(
    1,
    "is_palindrome",
    "Return True if the string s reads the same forwards and backwards, ignoring case "
    "(other characters count as they are).",
    bug="the comparison is case-sensitive",
    buggy="""
        def is_palindrome(s):
            return s == s[::-1]
     """,
    fix="""
        def is_palindrome(s):
            t = s.lower()
            return t == t[::-1]
     """,
    wrong="""
        def is_palindrome(s):
            return s.lower() == s[::-1]
     """,
    tests={
        "plain": "check(is_palindrome('racecar'), True)\ncheck(is_palindrome('abc'), False)",
        "case": "check(is_palindrome('Abba'), True)\ncheck(is_palindrome('RaceCar'), True)",
        "empty": "check(is_palindrome(''), True)",
    },
)

task(
    1,
    "count_words",
    "Return the number of words in s, where words are separated by any amount of whitespace.",
    bug="splits on single spaces only",
    buggy="""
        def count_words(s):
            return len(s.split(" "))
     """,
    fix="""
        def count_words(s):
            return len(s.split())
     """,
    wrong="""
        def count_words(s):
            return len(s.strip().split(" "))
     """,
    tests={
        "simple": "check(count_words('the quick brown fox'), 4)",
        "spacing": "check(count_words('  many   spaces here '), 3)\ncheck(count_words('tab\\tand\\nnewline'), 3)",
        "empty": "check(count_words(''), 0)\ncheck(count_words('   '), 0)",
    },
)

task(
    1,
    "discount_price",
    "Return the price after a discount of percent percent, as a float (discount_price(200, 25) is 150.0).",
    bug="returns the discount instead of the discounted price",
    buggy="""
        def discount_price(price, percent):
            return price * percent / 100
     """,
    fix="""
        def discount_price(price, percent):
            return price * (100 - percent) / 100
     """,
    wrong="""
        def discount_price(price, percent):
            return price - percent
     """,
    tests={
        "quarter": "check(discount_price(200, 25), 150.0)",
        "half": "check(discount_price(80, 50), 40.0)",
        "none": "check(discount_price(100, 0), 100.0)",
    },
)

task(
    1,
    "initials",
    "Return the uppercase initials of the words in name, e.g. 'ada lovelace' -> 'AL'. "
    "Words are separated by whitespace, possibly several spaces.",
    bug="the initials are not uppercased",
    buggy="""
        def initials(name):
            return "".join(word[0] for word in name.split())
     """,
    fix="""
        def initials(name):
            return "".join(word[0].upper() for word in name.split())
     """,
    wrong="""
        def initials(name):
            return "".join(word[0].upper() for word in name.split(" "))
     """,
    tests={
        "two": "check(initials('ada lovelace'), 'AL')",
        "already_upper": "check(initials('Alan Mathison Turing'), 'AMT')",
        "spacing": "check(initials('  grace   hopper '), 'GH')",
    },
)

task(
    1,
    "has_duplicates",
    "Return True if some value occurs more than once in the list xs, else False.",
    bug="the comparison is inverted",
    buggy="""
        def has_duplicates(xs):
            return len(set(xs)) == len(xs)
     """,
    fix="""
        def has_duplicates(xs):
            return len(set(xs)) != len(xs)
     """,
    wrong="""
        def has_duplicates(xs):
            return len(set(xs)) > len(xs)
     """,
    tests={
        "yes": "check(has_duplicates([1, 2, 1]), True)\ncheck(has_duplicates(['a', 'a']), True)",
        "no": "check(has_duplicates([1, 2, 3]), False)\ncheck(has_duplicates([]), False)",
    },
)

task(
    1,
    "letter_grade",
    "Return the letter grade for a score: 'A' for 90 or more, 'B' for 80 or more, 'C' for 70 "
    "or more, 'D' for 60 or more, otherwise 'F'.",
    bug="strict comparisons put the boundary scores a grade too low",
    buggy="""
        def letter_grade(score):
            if score > 90:
                return "A"
            if score > 80:
                return "B"
            if score > 70:
                return "C"
            if score > 60:
                return "D"
            return "F"
     """,
    fix="""
        def letter_grade(score):
            if score >= 90:
                return "A"
            if score >= 80:
                return "B"
            if score >= 70:
                return "C"
            if score >= 60:
                return "D"
            return "F"
     """,
    wrong="""
        def letter_grade(score):
            if score >= 90:
                return "A"
            if score >= 80:
                return "B"
            if score > 70:
                return "C"
            if score > 60:
                return "D"
            return "F"
     """,
    tests={
        "middle": "check(letter_grade(95), 'A')\ncheck(letter_grade(85), 'B')\ncheck(letter_grade(42), 'F')",
        "boundaries": "check(letter_grade(90), 'A')\ncheck(letter_grade(80), 'B')",
        "low_boundaries": "check(letter_grade(70), 'C')\ncheck(letter_grade(60), 'D')\ncheck(letter_grade(59), 'F')",
    },
)

task(
    1,
    "digit_sum",
    "Return the sum of the decimal digits of the integer n >= 0, as an int.",
    bug="true division turns n into a float",
    buggy="""
        def digit_sum(n):
            total = 0
            while n > 0:
                total += n % 10
                n = n / 10
            return total
     """,
    fix="""
        def digit_sum(n):
            total = 0
            while n > 0:
                total += n % 10
                n = n // 10
            return total
     """,
    wrong="""
        def digit_sum(n):
            total = 0
            while n > 9:
                total += n % 10
                n = n // 10
            return total
     """,
    tests={
        "values": "check(digit_sum(123), 6)\ncheck(digit_sum(9875), 29)",
        "small": "check(digit_sum(7), 7)\ncheck(digit_sum(0), 0)",
    },
)

task(
    1,
    "first_evens",
    "Return a list of the first n even numbers, starting at 0: first_evens(3) is [0, 2, 4].",
    bug="filters range(n) instead of generating n numbers",
    buggy="""
        def first_evens(n):
            return [i for i in range(n) if i % 2 == 0]
     """,
    fix="""
        def first_evens(n):
            return [2 * i for i in range(n)]
     """,
    wrong="""
        def first_evens(n):
            return [2 * i for i in range(1, n + 1)]
     """,
    tests={
        "three": "check(first_evens(3), [0, 2, 4])",
        "five": "check(first_evens(5), [0, 2, 4, 6, 8])",
        "none": "check(first_evens(0), [])",
    },
)

# ---------------------------------------------------------------------------------------------------------------
# Difficulty 2: edge cases (empty input, negatives, duplicates), loop bounds, mutable defaults, aliasing.
# ---------------------------------------------------------------------------------------------------------------

task(
    2,
    "max_value",
    "Return the largest number in the list xs, or None if xs is empty. Numbers may be negative.",
    bug="starts from 0, so all-negative lists and the empty list go wrong",
    buggy="""
        def max_value(xs):
            best = 0
            for x in xs:
                if x > best:
                    best = x
            return best
     """,
    fix="""
        def max_value(xs):
            if not xs:
                return None
            best = xs[0]
            for x in xs[1:]:
                if x > best:
                    best = x
            return best
     """,
    wrong="""
        def max_value(xs):
            best = xs[0]
            for x in xs[1:]:
                if x > best:
                    best = x
            return best
     """,
    tests={
        "positive": "check(max_value([3, 9, 2]), 9)",
        "negative": "check(max_value([-5, -2, -9]), -2)",
        "empty": "check(max_value([]), None)",
    },
)

task(
    2,
    "append_item",
    "Append item to the list items in place and return that same list. If items is not given, "
    "return a new list containing just item; separate calls without items must not share a list.",
    bug="mutable default argument shared between calls",
    buggy="""
        def append_item(item, items=[]):
            items.append(item)
            return items
     """,
    fix="""
        def append_item(item, items=None):
            if items is None:
                items = []
            items.append(item)
            return items
     """,
    wrong="""
        def append_item(item, items=None):
            items = items or []
            items.append(item)
            return items
     """,
    tests={
        "fresh_lists": "check(append_item(1), [1])\ncheck(append_item(2), [2])",
        "given_list": "xs = [1, 2]\nresult = append_item(3, xs)\ncheck(xs, [1, 2, 3])\nassert result is xs",
        "given_empty_list": "xs = []\nappend_item('a', xs)\ncheck(xs, ['a'])",
    },
)

task(
    2,
    "chunk",
    "Split the list xs into consecutive chunks of length size (size >= 1); the last chunk may be "
    "shorter. chunk([1, 2, 3, 4, 5], 2) is [[1, 2], [3, 4], [5]].",
    bug="the range stops before the final chunk",
    buggy="""
        def chunk(xs, size):
            return [xs[i:i + size] for i in range(0, len(xs) - size, size)]
     """,
    fix="""
        def chunk(xs, size):
            return [xs[i:i + size] for i in range(0, len(xs), size)]
     """,
    wrong="""
        def chunk(xs, size):
            return [xs[i:i + size] for i in range(0, len(xs) - size + 1, size)]
     """,
    tests={
        "even": "check(chunk([1, 2, 3, 4], 2), [[1, 2], [3, 4]])",
        "ragged": "check(chunk([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]])",
        "big_size": "check(chunk([1, 2], 5), [[1, 2]])\ncheck(chunk([], 3), [])",
    },
)

task(
    2,
    "second_largest",
    "Return the second largest distinct value in xs, or None if xs has fewer than two "
    "distinct values. second_largest([5, 5, 3]) is 3.",
    bug="duplicates of the maximum are not skipped and short lists crash",
    buggy="""
        def second_largest(xs):
            ordered = sorted(xs)
            return ordered[-2]
     """,
    fix="""
        def second_largest(xs):
            distinct = sorted(set(xs))
            if len(distinct) < 2:
                return None
            return distinct[-2]
     """,
    wrong="""
        def second_largest(xs):
            distinct = sorted(set(xs))
            return distinct[-2]
     """,
    tests={
        "plain": "check(second_largest([1, 4, 2, 3]), 3)",
        "duplicates": "check(second_largest([5, 5, 3]), 3)\ncheck(second_largest([-1, -1, -2]), -2)",
        "too_few": "check(second_largest([7, 7]), None)\ncheck(second_largest([]), None)",
    },
)

task(
    2,
    "mean_positive",
    "Return the mean (a float) of the strictly positive numbers in xs, ignoring the others; "
    "return None if there are none.",
    bug="divides by the length of the whole list",
    buggy="""
        def mean_positive(xs):
            total = sum(x for x in xs if x > 0)
            return total / len(xs)
     """,
    fix="""
        def mean_positive(xs):
            positive = [x for x in xs if x > 0]
            if not positive:
                return None
            return sum(positive) / len(positive)
     """,
    wrong="""
        def mean_positive(xs):
            positive = [x for x in xs if x > 0]
            return sum(positive) / len(positive)
     """,
    tests={
        "mixed": "check(mean_positive([2, -3, 4, 0]), 3.0)",
        "all_positive": "check(mean_positive([1, 2]), 1.5)",
        "none": "check(mean_positive([-1, 0]), None)\ncheck(mean_positive([]), None)",
    },
)

task(
    2,
    "running_sum",
    "Return the running totals of xs: element i of the result is xs[0] + ... + xs[i]. "
    "running_sum([1, 2, 3]) is [1, 3, 6].",
    bug="appends the total before adding the current element",
    buggy="""
        def running_sum(xs):
            out = []
            total = 0
            for x in xs:
                out.append(total)
                total += x
            return out
     """,
    fix="""
        def running_sum(xs):
            out = []
            total = 0
            for x in xs:
                total += x
                out.append(total)
            return out
     """,
    wrong="""
        def running_sum(xs):
            out = [xs[0]]
            for x in xs[1:]:
                out.append(out[-1] + x)
            return out
     """,
    tests={
        "values": "check(running_sum([1, 2, 3]), [1, 3, 6])\ncheck(running_sum([5, -5, 2]), [5, 0, 2])",
        "empty": "check(running_sum([]), [])",
    },
)

task(
    2,
    "dedupe",
    "Return the elements of xs without duplicates, keeping the first occurrence of each and the "
    "original order. dedupe([3, 1, 3, 2, 1]) is [3, 1, 2].",
    bug="a set loses the original order",
    buggy="""
        def dedupe(xs):
            return list(set(xs))
     """,
    fix="""
        def dedupe(xs):
            seen = set()
            out = []
            for x in xs:
                if x not in seen:
                    seen.add(x)
                    out.append(x)
            return out
     """,
    wrong="""
        def dedupe(xs):
            return sorted(set(xs))
     """,
    tests={
        "order": "check(dedupe([3, 1, 3, 2, 1]), [3, 1, 2])",
        "no_duplicates": "check(dedupe([9, 8, 7]), [9, 8, 7])",
        "empty": "check(dedupe([]), [])",
    },
)

task(
    2,
    "count_in_range",
    "Return how many numbers in xs lie in the closed interval [lo, hi] (both ends included).",
    bug="the ends of the interval are excluded",
    buggy="""
        def count_in_range(xs, lo, hi):
            return sum(1 for x in xs if lo < x < hi)
     """,
    fix="""
        def count_in_range(xs, lo, hi):
            return sum(1 for x in xs if lo <= x <= hi)
     """,
    wrong="""
        def count_in_range(xs, lo, hi):
            return sum(1 for x in xs if lo <= x < hi)
     """,
    tests={
        "inside": "check(count_in_range([1, 5, 7, 12], 2, 10), 2)",
        "ends": "check(count_in_range([2, 10, 11], 2, 10), 2)\ncheck(count_in_range([4, 4], 4, 4), 2)",
        "empty": "check(count_in_range([], 0, 1), 0)",
    },
)

task(
    2,
    "word_counts",
    "Count the words of text in a dict word -> count. Words are separated by whitespace, "
    "compared in lowercase, and stripped of the punctuation . , ! ? ; : at either end; "
    "tokens that are only punctuation are skipped.",
    bug="no lowercasing and no punctuation stripping",
    buggy="""
        def word_counts(text):
            counts = {}
            for word in text.split():
                counts[word] = counts.get(word, 0) + 1
            return counts
     """,
    fix="""
        def word_counts(text):
            counts = {}
            for word in text.lower().split():
                word = word.strip(".,!?;:")
                if word:
                    counts[word] = counts.get(word, 0) + 1
            return counts
     """,
    wrong="""
        def word_counts(text):
            counts = {}
            for word in text.lower().split():
                counts[word] = counts.get(word, 0) + 1
            return counts
     """,
    tests={
        "case": "check(word_counts('The cat the dog'), {'the': 2, 'cat': 1, 'dog': 1})",
        "punctuation": "check(word_counts('Hi, hi! Bye. -- !'), {'hi': 2, 'bye': 1, '--': 1})",
        "empty": "check(word_counts(''), {})",
    },
)

task(
    2,
    "merge_settings",
    "Return a new dict: the defaults (by default {'color': 'blue', 'size': 10}) updated with "
    "the key/value pairs of overrides. Neither argument may be modified, and calls must not affect each other.",
    bug="updates the shared default dict in place",
    buggy="""
        def merge_settings(overrides, defaults={"color": "blue", "size": 10}):
            defaults.update(overrides)
            return defaults
     """,
    fix="""
        def merge_settings(overrides, defaults={"color": "blue", "size": 10}):
            merged = dict(defaults)
            merged.update(overrides)
            return merged
     """,
    wrong="""
        def merge_settings(overrides, defaults={"color": "blue", "size": 10}):
            merged = defaults
            merged.update(overrides)
            return merged
     """,
    tests={
        "override": "check(merge_settings({'size': 12}), {'color': 'blue', 'size': 12})",
        "independent_calls": "merge_settings({'color': 'red', 'extra': 1})\n"
        "check(merge_settings({}), {'color': 'blue', 'size': 10})",
        "explicit_defaults": "base = {'a': 1}\ncheck(merge_settings({'b': 2}, base), {'a': 1, 'b': 2})\n"
        "check(base, {'a': 1})",
    },
)

task(
    2,
    "find_index",
    "Return the index of the first occurrence of target in xs, or -1 if it does not occur.",
    bug="the loop skips index 0",
    buggy="""
        def find_index(xs, target):
            for i in range(1, len(xs)):
                if xs[i] == target:
                    return i
            return -1
     """,
    fix="""
        def find_index(xs, target):
            for i in range(len(xs)):
                if xs[i] == target:
                    return i
            return -1
     """,
    wrong="""
        def find_index(xs, target):
            for i in range(len(xs) - 1):
                if xs[i] == target:
                    return i
            return -1
     """,
    tests={
        "first": "check(find_index([4, 5, 6], 4), 0)",
        "middle_and_last": "check(find_index([4, 5, 6], 5), 1)\ncheck(find_index([4, 5, 6], 6), 2)",
        "missing": "check(find_index([4, 5, 6], 9), -1)\ncheck(find_index([], 1), -1)",
        "repeated": "check(find_index([1, 2, 1], 1), 0)",
    },
)

task(
    2,
    "median",
    "Return the median of the numbers in xs (any order): the middle value of the sorted list, or the "
    "mean of the two middle values (a float) when the length is even. Return None for an empty list.",
    bug="even lengths return one middle value",
    buggy="""
        def median(xs):
            if not xs:
                return None
            s = sorted(xs)
            return s[len(s) // 2]
     """,
    fix="""
        def median(xs):
            if not xs:
                return None
            s = sorted(xs)
            n = len(s)
            if n % 2 == 1:
                return s[n // 2]
            return (s[n // 2 - 1] + s[n // 2]) / 2
     """,
    wrong="""
        def median(xs):
            if not xs:
                return None
            s = sorted(xs)
            n = len(s)
            if n % 2 == 1:
                return s[n // 2]
            return (s[n // 2] + s[n // 2 + 1]) / 2
     """,
    tests={
        "odd": "check(median([3, 1, 2]), 2)",
        "even": "check(median([4, 1, 3, 2]), 2.5)\ncheck(median([10, 20]), 15.0)",
        "empty": "check(median([]), None)",
    },
)

task(
    2,
    "truncate",
    "Shorten s to at most n characters (n >= 3): if s is longer than n, return its first n - 3 "
    "characters followed by '...'; otherwise return s unchanged.",
    bug="truncates strings of exactly n characters and the result is too long",
    buggy="""
        def truncate(s, n):
            if len(s) >= n:
                return s[:n] + "..."
            return s
     """,
    fix="""
        def truncate(s, n):
            if len(s) > n:
                return s[:n - 3] + "..."
            return s
     """,
    wrong="""
        def truncate(s, n):
            if len(s) > n:
                return s[:n] + "..."
            return s
     """,
    tests={
        "long": "check(truncate('hello world', 8), 'hello...')",
        "exact": "check(truncate('hello', 5), 'hello')",
        "short": "check(truncate('hi', 10), 'hi')\ncheck(truncate('', 3), '')",
    },
)

task(
    2,
    "normalize",
    "Rescale the numbers in xs linearly to [0, 1]: (x - min) / (max - min), as floats. If all values "
    "are equal return a list of 0.0; for an empty list return [].",
    bug="divides by zero when all values are equal and crashes on an empty list",
    buggy="""
        def normalize(xs):
            lo, hi = min(xs), max(xs)
            return [(x - lo) / (hi - lo) for x in xs]
     """,
    fix="""
        def normalize(xs):
            if not xs:
                return []
            lo, hi = min(xs), max(xs)
            if lo == hi:
                return [0.0 for _ in xs]
            return [(x - lo) / (hi - lo) for x in xs]
     """,
    wrong="""
        def normalize(xs):
            lo, hi = min(xs), max(xs)
            if lo == hi:
                return [0.0 for _ in xs]
            return [(x - lo) / (hi - lo) for x in xs]
     """,
    tests={
        "spread": "check(normalize([2, 4, 6]), [0.0, 0.5, 1.0])",
        "flat": "check(normalize([3, 3]), [0.0, 0.0])",
        "empty": "check(normalize([]), [])",
    },
)

task(
    2,
    "rotate_right",
    "Rotate the list xs right by k >= 0 places and return the new list; k may exceed the "
    "length. rotate_right([1, 2, 3], 1) is [3, 1, 2]; the empty list stays empty.",
    bug="k larger than the length is not reduced",
    buggy="""
        def rotate_right(xs, k):
            return xs[-k:] + xs[:-k]
     """,
    fix="""
        def rotate_right(xs, k):
            if not xs:
                return []
            k %= len(xs)
            return xs[-k:] + xs[:-k]
     """,
    wrong="""
        def rotate_right(xs, k):
            k %= len(xs)
            return xs[-k:] + xs[:-k]
     """,
    tests={
        "small": "check(rotate_right([1, 2, 3], 1), [3, 1, 2])\ncheck(rotate_right([1, 2, 3], 0), [1, 2, 3])",
        "large_k": "check(rotate_right([1, 2, 3], 4), [3, 1, 2])\ncheck(rotate_right([1, 2], 6), [1, 2])",
        "empty": "check(rotate_right([], 2), [])",
    },
)

task(
    2,
    "is_sorted",
    "Return True if xs is in non-decreasing order (equal neighbours are allowed), else False.",
    bug="the loop reads one past the end",
    buggy="""
        def is_sorted(xs):
            for i in range(len(xs)):
                if xs[i] > xs[i + 1]:
                    return False
            return True
     """,
    fix="""
        def is_sorted(xs):
            for i in range(len(xs) - 1):
                if xs[i] > xs[i + 1]:
                    return False
            return True
     """,
    wrong="""
        def is_sorted(xs):
            for i in range(len(xs) - 1):
                if xs[i] >= xs[i + 1]:
                    return False
            return True
     """,
    tests={
        "sorted": "check(is_sorted([1, 2, 3]), True)",
        "unsorted": "check(is_sorted([1, 3, 2]), False)",
        "equal": "check(is_sorted([1, 1, 2]), True)",
        "short": "check(is_sorted([]), True)\ncheck(is_sorted([5]), True)",
    },
)

task(
    2,
    "digits_to_int",
    "Turn a list of decimal digits, most significant first, into the integer: [1, 2, 3] -> 123. "
    "The empty list gives 0.",
    bug="weights the digits in reverse order",
    buggy="""
        def digits_to_int(digits):
            n = 0
            for i, d in enumerate(digits):
                n += d * 10 ** i
            return n
     """,
    fix="""
        def digits_to_int(digits):
            n = 0
            for d in digits:
                n = n * 10 + d
            return n
     """,
    wrong="""
        def digits_to_int(digits):
            n = 0
            for i, d in enumerate(digits):
                n += d * 10 ** (len(digits) - i)
            return n
     """,
    tests={
        "values": "check(digits_to_int([1, 2, 3]), 123)\ncheck(digits_to_int([4, 0]), 40)",
        "single": "check(digits_to_int([7]), 7)",
        "empty": "check(digits_to_int([]), 0)",
    },
)

task(
    2,
    "parse_bool",
    "Parse a yes/no string: 'true', 'yes', '1', 'on' give True and 'false', 'no', '0', 'off' give "
    "False, ignoring case and surrounding whitespace. Anything else raises ValueError.",
    bug="no whitespace stripping, and unknown words silently give False",
    buggy="""
        def parse_bool(s):
            return s.lower() in ("true", "yes", "1", "on")
     """,
    fix="""
        def parse_bool(s):
            word = s.strip().lower()
            if word in ("true", "yes", "1", "on"):
                return True
            if word in ("false", "no", "0", "off"):
                return False
            raise ValueError(f"not a boolean: {s!r}")
     """,
    wrong="""
        def parse_bool(s):
            return s.strip().lower() in ("true", "yes", "1", "on")
     """,
    tests={
        "true": "check(parse_bool('Yes'), True)\ncheck(parse_bool(' on '), True)",
        "false": "check(parse_bool('FALSE'), False)\ncheck(parse_bool('0'), False)",
        "invalid": "raises(ValueError, parse_bool, 'maybe')\nraises(ValueError, parse_bool, '')",
    },
)

task(
    2,
    "group_by_length",
    "Group words by their length: return a dict length -> list of the words of that length, in their original order.",
    bug="each word replaces the earlier words of its length",
    buggy="""
        def group_by_length(words):
            groups = {}
            for w in words:
                groups[len(w)] = [w]
            return groups
     """,
    fix="""
        def group_by_length(words):
            groups = {}
            for w in words:
                groups.setdefault(len(w), []).append(w)
            return groups
     """,
    wrong="""
        def group_by_length(words):
            groups = {}
            for w in words:
                groups[len(w)] = groups.get(len(w), []).append(w)
            return groups
     """,
    tests={
        "groups": "check(group_by_length(['a', 'bb', 'c', 'dd', 'eee']), {1: ['a', 'c'], 2: ['bb', 'dd'], 3: ['eee']})",
        "single": "check(group_by_length(['xyz']), {3: ['xyz']})",
        "empty": "check(group_by_length([]), {})",
    },
)

task(
    2,
    "title_case",
    "Capitalise each space-separated word of s: its first character in uppercase and the rest "
    'in lowercase; everything else (spacing, apostrophes) stays as it is. "don\'t STOP" -> "Don\'t Stop".',
    bug="capitalises only the first word",
    buggy="""
        def title_case(s):
            return s.capitalize()
     """,
    fix="""
        def title_case(s):
            return " ".join(w[:1].upper() + w[1:].lower() for w in s.split(" "))
     """,
    wrong="""
        def title_case(s):
            return s.title()
     """,
    tests={
        "words": "check(title_case('hello wORLD'), 'Hello World')",
        "apostrophe": 'check(title_case("don\'t STOP"), "Don\'t Stop")',
        "spacing": "check(title_case('a  b'), 'A  B')\ncheck(title_case(''), '')",
    },
)

task(
    2,
    "common_elements",
    "Return the values that occur in both a and b, each once, in the order of their first occurrence in a.",
    bug="repeated values in a appear repeatedly in the result",
    buggy="""
        def common_elements(a, b):
            return [x for x in a if x in b]
     """,
    fix="""
        def common_elements(a, b):
            out = []
            for x in a:
                if x in b and x not in out:
                    out.append(x)
            return out
     """,
    wrong="""
        def common_elements(a, b):
            return list(set(a) & set(b))
     """,
    tests={
        "order": "check(common_elements([5, 3, 1, 3], [1, 3, 5]), [5, 3, 1])",
        "repeats": "check(common_elements([2, 2, 4], [2]), [2])",
        "disjoint": "check(common_elements([1], [2]), [])",
    },
)

task(
    2,
    "last_n",
    "Return the last n elements of xs (n >= 0) as a list; all of xs if n exceeds its length, and [] when n is 0.",
    bug="xs[-0:] is the whole list",
    buggy="""
        def last_n(xs, n):
            return xs[-n:]
     """,
    fix="""
        def last_n(xs, n):
            return xs[max(len(xs) - n, 0):]
     """,
    wrong="""
        def last_n(xs, n):
            return xs[len(xs) - n:]
     """,
    tests={
        "some": "check(last_n([1, 2, 3, 4], 2), [3, 4])",
        "zero": "check(last_n([1, 2, 3], 0), [])",
        "too_many": "check(last_n([1, 2, 3], 5), [1, 2, 3])",
    },
)

# ---------------------------------------------------------------------------------------------------------------
# Difficulty 3: multi-step logic: parsing, small algorithms, matrices, tokenising.
# ---------------------------------------------------------------------------------------------------------------

task(
    3,
    "binary_search",
    "Return the index of target in the sorted list xs (distinct values), or -1 if absent, using binary search.",
    bug="the loop stops before checking a one-element range",
    buggy="""
        def binary_search(xs, target):
            lo, hi = 0, len(xs) - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if xs[mid] == target:
                    return mid
                if xs[mid] < target:
                    lo = mid + 1
                else:
                    hi = mid - 1
            return -1
     """,
    fix="""
        def binary_search(xs, target):
            lo, hi = 0, len(xs) - 1
            while lo <= hi:
                mid = (lo + hi) // 2
                if xs[mid] == target:
                    return mid
                if xs[mid] < target:
                    lo = mid + 1
                else:
                    hi = mid - 1
            return -1
     """,
    wrong="""
        def binary_search(xs, target):
            lo, hi = 0, len(xs)
            while lo <= hi:
                mid = (lo + hi) // 2
                if xs[mid] == target:
                    return mid
                if xs[mid] < target:
                    lo = mid + 1
                else:
                    hi = mid - 1
            return -1
     """,
    tests={
        "found": "xs = [1, 3, 5, 7, 9, 11]\nfor i, x in enumerate(xs):\n    check(binary_search(xs, x), i)",
        "single": "check(binary_search([4], 4), 0)",
        "missing": "check(binary_search([1, 3, 5], 4), -1)\ncheck(binary_search([1, 3, 5], 9), -1)\n"
        "check(binary_search([], 1), -1)",
    },
)

task(
    3,
    "merge_intervals",
    "Merge overlapping closed intervals. intervals is a list of [start, end] pairs in any "
    "order; intervals that overlap or touch ([1, 2] and [2, 3]) are merged. Return the merged intervals as a list "
    "of [start, end] lists sorted by start, without modifying the input.",
    bug="the intervals are not sorted first and a contained interval shrinks the end",
    buggy="""
        def merge_intervals(intervals):
            merged = []
            for start, end in intervals:
                if merged and start <= merged[-1][1]:
                    merged[-1][1] = end
                else:
                    merged.append([start, end])
            return merged
     """,
    fix="""
        def merge_intervals(intervals):
            merged = []
            for start, end in sorted(intervals):
                if merged and start <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], end)
                else:
                    merged.append([start, end])
            return merged
     """,
    wrong="""
        def merge_intervals(intervals):
            merged = []
            for start, end in sorted(intervals):
                if merged and start <= merged[-1][1]:
                    merged[-1][1] = end
                else:
                    merged.append([start, end])
            return merged
     """,
    tests={
        "overlap": "check(merge_intervals([[1, 3], [2, 6], [8, 10]]), [[1, 6], [8, 10]])",
        "unsorted": "check(merge_intervals([[8, 10], [1, 3], [2, 4]]), [[1, 4], [8, 10]])",
        "touching": "check(merge_intervals([[1, 2], [2, 3]]), [[1, 3]])",
        "contained": "check(merge_intervals([[1, 10], [2, 3], [4, 5]]), [[1, 10]])",
        "input_unchanged": "data = [[3, 4], [1, 2]]\nmerge_intervals(data)\ncheck(data, [[3, 4], [1, 2]])\n"
        "check(merge_intervals([]), [])",
    },
)

task(
    3,
    "rle_encode",
    "Run-length encode s: each run of a repeated character becomes its length followed by the "
    "character, so 'aaabcc' -> '3a1b2c'. The empty string encodes to ''.",
    bug="the last run is never written",
    buggy="""
        def rle_encode(s):
            if not s:
                return ""
            out = []
            prev, count = s[0], 1
            for ch in s[1:]:
                if ch == prev:
                    count += 1
                else:
                    out.append(f"{count}{prev}")
                    prev, count = ch, 1
            return "".join(out)
     """,
    fix="""
        def rle_encode(s):
            if not s:
                return ""
            out = []
            prev, count = s[0], 1
            for ch in s[1:]:
                if ch == prev:
                    count += 1
                else:
                    out.append(f"{count}{prev}")
                    prev, count = ch, 1
            out.append(f"{count}{prev}")
            return "".join(out)
     """,
    wrong="""
        def rle_encode(s):
            out = []
            prev, count = s[0], 1
            for ch in s[1:]:
                if ch == prev:
                    count += 1
                else:
                    out.append(f"{count}{prev}")
                    prev, count = ch, 1
            out.append(f"{count}{prev}")
            return "".join(out)
     """,
    tests={
        "runs": "check(rle_encode('aaabcc'), '3a1b2c')",
        "long_run": "check(rle_encode('x' * 12 + 'y'), '12x1y')",
        "single": "check(rle_encode('z'), '1z')",
        "empty": "check(rle_encode(''), '')",
    },
)

task(
    3,
    "rle_decode",
    "Decode a run-length string in which each character is preceded by its count (one or more "
    "decimal digits): '3a1b12c' -> 'aaab' + 'c' * 12. The empty string decodes to ''.",
    bug="reads counts as a single digit",
    buggy="""
        def rle_decode(s):
            out = []
            for i in range(0, len(s), 2):
                out.append(s[i + 1] * int(s[i]))
            return "".join(out)
     """,
    fix="""
        import re


        def rle_decode(s):
            return "".join(ch * int(count) for count, ch in re.findall(r"(\\d+)(\\D)", s))
     """,
    wrong="""
        import re


        def rle_decode(s):
            return "".join(ch * int(count) for count, ch in re.findall(r"(\\d)(\\D)", s))
     """,
    tests={
        "short": "check(rle_decode('3a1b2c'), 'aaabcc')",
        "multi_digit": "check(rle_decode('12x1y'), 'x' * 12 + 'y')\ncheck(rle_decode('10a'), 'a' * 10)",
        "empty": "check(rle_decode(''), '')",
    },
)

task(
    3,
    "roman_to_int",
    "Convert a valid Roman numeral (I, V, X, L, C, D, M, with subtractive pairs such as IV, IX, "
    "XL, XC, CD, CM) to an integer.",
    bug="subtractive pairs are added",
    buggy="""
        def roman_to_int(s):
            values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
            total = 0
            for ch in s:
                total += values[ch]
            return total
     """,
    fix="""
        def roman_to_int(s):
            values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
            total = 0
            for i, ch in enumerate(s):
                v = values[ch]
                if i + 1 < len(s) and v < values[s[i + 1]]:
                    total -= v
                else:
                    total += v
            return total
     """,
    wrong="""
        def roman_to_int(s):
            values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
            total = 0
            for i, ch in enumerate(s):
                v = values[ch]
                if i + 1 < len(s) and v <= values[s[i + 1]]:
                    total -= v
                else:
                    total += v
            return total
     """,
    tests={
        "additive": "check(roman_to_int('VI'), 6)\ncheck(roman_to_int('LXX'), 70)",
        "repeated": "check(roman_to_int('III'), 3)\ncheck(roman_to_int('MM'), 2000)",
        "subtractive": "check(roman_to_int('IV'), 4)\ncheck(roman_to_int('XC'), 90)",
        "mixed": "check(roman_to_int('MCMXCIV'), 1994)\ncheck(roman_to_int('MMXXIV'), 2024)",
    },
)

task(
    3,
    "int_to_roman",
    "Convert an integer 1 <= n <= 3999 to a Roman numeral in standard form, using subtractive "
    "pairs (4 is IV, 9 is IX, 40 is XL, 90 is XC, 400 is CD, 900 is CM).",
    bug="the table lacks the subtractive pairs",
    buggy="""
        def int_to_roman(n):
            table = [(1000, "M"), (500, "D"), (100, "C"), (50, "L"), (10, "X"), (5, "V"), (1, "I")]
            out = []
            for value, symbol in table:
                while n >= value:
                    out.append(symbol)
                    n -= value
            return "".join(out)
     """,
    fix="""
        def int_to_roman(n):
            table = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                     (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]
            out = []
            for value, symbol in table:
                while n >= value:
                    out.append(symbol)
                    n -= value
            return "".join(out)
     """,
    wrong="""
        def int_to_roman(n):
            table = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                     (50, "L"), (40, "XL"), (10, "X"), (5, "V"), (9, "IX"), (4, "IV"), (1, "I")]
            out = []
            for value, symbol in table:
                while n >= value:
                    out.append(symbol)
                    n -= value
            return "".join(out)
     """,
    tests={
        "simple": "check(int_to_roman(3), 'III')\ncheck(int_to_roman(58), 'LVIII')",
        "fours": "check(int_to_roman(4), 'IV')\ncheck(int_to_roman(40), 'XL')\ncheck(int_to_roman(400), 'CD')",
        "nines": "check(int_to_roman(9), 'IX')\ncheck(int_to_roman(99), 'XCIX')",
        "large": "check(int_to_roman(1994), 'MCMXCIV')\ncheck(int_to_roman(3999), 'MMMCMXCIX')",
    },
)

task(
    3,
    "transpose",
    "Return the transpose of a matrix given as a list of equal-length row lists, as a new list of "
    "lists (rows become columns). The matrix may be rectangular; [] transposes to [].",
    bug="the index ranges are swapped, so only square matrices work",
    buggy="""
        def transpose(matrix):
            if not matrix:
                return []
            return [[matrix[i][j] for i in range(len(matrix[0]))] for j in range(len(matrix))]
     """,
    fix="""
        def transpose(matrix):
            if not matrix:
                return []
            return [[matrix[i][j] for i in range(len(matrix))] for j in range(len(matrix[0]))]
     """,
    wrong="""
        def transpose(matrix):
            return list(zip(*matrix))
     """,
    tests={
        "square": "check(transpose([[1, 2], [3, 4]]), [[1, 3], [2, 4]])",
        "wide": "check(transpose([[1, 2, 3], [4, 5, 6]]), [[1, 4], [2, 5], [3, 6]])",
        "tall": "check(transpose([[1], [2], [3]]), [[1, 2, 3]])",
        "empty": "check(transpose([]), [])",
    },
)

task(
    3,
    "matmul",
    "Multiply matrix a (n x m) by matrix b (m x p), both lists of row lists, and return the n x p "
    "product as a list of row lists.",
    bug="the inner sum runs over the wrong dimension and indexes b by row",
    buggy="""
        def matmul(a, b):
            n, p = len(a), len(b[0])
            return [[sum(a[i][k] * b[j][k] for k in range(len(b[0]))) for j in range(p)] for i in range(n)]
     """,
    fix="""
        def matmul(a, b):
            n, m, p = len(a), len(b), len(b[0])
            return [[sum(a[i][k] * b[k][j] for k in range(m)) for j in range(p)] for i in range(n)]
     """,
    wrong="""
        def matmul(a, b):
            n, p = len(a), len(b[0])
            return [[sum(a[i][k] * b[k][j] for k in range(p)) for j in range(p)] for i in range(n)]
     """,
    tests={
        "square": "check(matmul([[1, 2], [3, 4]], [[5, 6], [7, 8]]), [[19, 22], [43, 50]])",
        "identity": "check(matmul([[1, 0], [0, 1]], [[2, 3], [4, 5]]), [[2, 3], [4, 5]])",
        "rectangular": "check(matmul([[1, 2, 3]], [[1], [2], [3]]), [[14]])\n"
        "check(matmul([[1], [2]], [[3, 4, 5]]), [[3, 4, 5], [6, 8, 10]])",
    },
)

task(
    3,
    "tokenize",
    "Split an arithmetic expression into tokens: integers (runs of digits), names (a letter or _ "
    "followed by letters, digits or _), and the single characters + - * / ( ). Whitespace separates tokens and is "
    "dropped; any other character raises ValueError. tokenize('3+(x1 * 42)') is "
    "['3', '+', '(', 'x1', '*', '42', ')'].",
    bug="after a number or a name the next character is skipped",
    buggy="""
        def tokenize(expr):
            tokens = []
            i = 0
            while i < len(expr):
                ch = expr[i]
                if ch.isspace():
                    i += 1
                elif ch.isdigit():
                    j = i
                    while j < len(expr) and expr[j].isdigit():
                        j += 1
                    tokens.append(expr[i:j])
                    i = j + 1
                elif ch.isalpha() or ch == "_":
                    j = i
                    while j < len(expr) and (expr[j].isalnum() or expr[j] == "_"):
                        j += 1
                    tokens.append(expr[i:j])
                    i = j + 1
                elif ch in "+-*/()":
                    tokens.append(ch)
                    i += 1
                else:
                    raise ValueError(f"unexpected character {ch!r}")
            return tokens
     """,
    fix="""
        def tokenize(expr):
            tokens = []
            i = 0
            while i < len(expr):
                ch = expr[i]
                if ch.isspace():
                    i += 1
                elif ch.isdigit():
                    j = i
                    while j < len(expr) and expr[j].isdigit():
                        j += 1
                    tokens.append(expr[i:j])
                    i = j
                elif ch.isalpha() or ch == "_":
                    j = i
                    while j < len(expr) and (expr[j].isalnum() or expr[j] == "_"):
                        j += 1
                    tokens.append(expr[i:j])
                    i = j
                elif ch in "+-*/()":
                    tokens.append(ch)
                    i += 1
                else:
                    raise ValueError(f"unexpected character {ch!r}")
            return tokens
     """,
    wrong="""
        def tokenize(expr):
            tokens = []
            i = 0
            while i < len(expr):
                ch = expr[i]
                if ch.isspace():
                    i += 1
                elif ch.isdigit():
                    j = i
                    while j < len(expr) and expr[j].isdigit():
                        j += 1
                    tokens.append(expr[i:j])
                    i = j
                elif ch.isalpha() or ch == "_":
                    j = i
                    while j < len(expr) and (expr[j].isalnum() or expr[j] == "_"):
                        j += 1
                    tokens.append(expr[i:j])
                    i = j + 1
                elif ch in "+-*/()":
                    tokens.append(ch)
                    i += 1
                else:
                    raise ValueError(f"unexpected character {ch!r}")
            return tokens
     """,
    tests={
        "numbers": "check(tokenize('12+34'), ['12', '+', '34'])",
        "names": "check(tokenize('x1*(y_2-3)'), ['x1', '*', '(', 'y_2', '-', '3', ')'])",
        "spaces": "check(tokenize(' 3 + (x1 * 42) '), ['3', '+', '(', 'x1', '*', '42', ')'])",
        "invalid": "raises(ValueError, tokenize, '2 $ 3')",
    },
)

task(
    3,
    "eval_rpn",
    "Evaluate a list of tokens in reverse Polish notation: integers (possibly negative, like '-2') "
    "and the operators + - * /, where / divides integers and truncates toward zero (7 / -2 is -3). "
    "Return the int result.",
    bug="the operands of - and / are taken in the wrong order",
    buggy="""
        def eval_rpn(tokens):
            stack = []
            for tok in tokens:
                if tok in ("+", "-", "*", "/"):
                    a = stack.pop()
                    b = stack.pop()
                    if tok == "+":
                        stack.append(a + b)
                    elif tok == "-":
                        stack.append(a - b)
                    elif tok == "*":
                        stack.append(a * b)
                    else:
                        stack.append(int(a / b))
                else:
                    stack.append(int(tok))
            return stack[-1]
     """,
    fix="""
        def eval_rpn(tokens):
            stack = []
            for tok in tokens:
                if tok in ("+", "-", "*", "/"):
                    b = stack.pop()
                    a = stack.pop()
                    if tok == "+":
                        stack.append(a + b)
                    elif tok == "-":
                        stack.append(a - b)
                    elif tok == "*":
                        stack.append(a * b)
                    else:
                        stack.append(int(a / b))
                else:
                    stack.append(int(tok))
            return stack[-1]
     """,
    wrong="""
        def eval_rpn(tokens):
            stack = []
            for tok in tokens:
                if tok in ("+", "-", "*", "/"):
                    b = stack.pop()
                    a = stack.pop()
                    if tok == "+":
                        stack.append(a + b)
                    elif tok == "-":
                        stack.append(a - b)
                    elif tok == "*":
                        stack.append(a * b)
                    else:
                        stack.append(a // b)
                else:
                    stack.append(int(tok))
            return stack[-1]
     """,
    tests={
        "add_mul": "check(eval_rpn(['2', '3', '+', '4', '*']), 20)",
        "order": "check(eval_rpn(['10', '4', '-']), 6)\ncheck(eval_rpn(['20', '5', '/']), 4)",
        "truncation": "check(eval_rpn(['7', '-2', '/']), -3)\ncheck(eval_rpn(['-7', '2', '/']), -3)",
        "single": "check(eval_rpn(['42']), 42)",
    },
)

task(
    3,
    "balanced",
    "Return True if the brackets (), [] and {} in s are balanced and properly nested; other "
    "characters are ignored. '([]{})' and 'a(b)c' are balanced, '(]' and '(()' are not.",
    bug="only counts brackets, ignoring nesting and order",
    buggy="""
        def balanced(s):
            return all(s.count(o) == s.count(c) for o, c in ("()", "[]", "{}"))
     """,
    fix="""
        def balanced(s):
            pairs = {")": "(", "]": "[", "}": "{"}
            stack = []
            for ch in s:
                if ch in "([{":
                    stack.append(ch)
                elif ch in pairs:
                    if not stack or stack.pop() != pairs[ch]:
                        return False
            return not stack
     """,
    wrong="""
        def balanced(s):
            pairs = {")": "(", "]": "[", "}": "{"}
            stack = []
            for ch in s:
                if ch in "([{":
                    stack.append(ch)
                elif ch in pairs:
                    if not stack or stack.pop() != pairs[ch]:
                        return False
            return True
     """,
    tests={
        "balanced": "check(balanced('([]{})'), True)\ncheck(balanced('a(b)c'), True)\ncheck(balanced(''), True)",
        "order": "check(balanced(')('), False)\ncheck(balanced('([)]'), False)",
        "unclosed": "check(balanced('(()'), False)\ncheck(balanced('{'), False)",
    },
)

task(
    3,
    "parse_duration",
    "Parse a duration such as '1h30m15s' into seconds (an int). Each part is a number "
    "followed by h, m or s; parts may be missing ('45s', '2h'). The empty string is 0. A number without a unit "
    "at the end ('90') raises ValueError.",
    bug="the digits of earlier parts are never cleared and a trailing number is ignored",
    buggy="""
        def parse_duration(s):
            units = {"h": 3600, "m": 60, "s": 1}
            total = 0
            num = ""
            for ch in s:
                if ch.isdigit():
                    num += ch
                else:
                    total += int(num) * units[ch]
            return total
     """,
    fix="""
        def parse_duration(s):
            units = {"h": 3600, "m": 60, "s": 1}
            total = 0
            num = ""
            for ch in s:
                if ch.isdigit():
                    num += ch
                else:
                    total += int(num) * units[ch]
                    num = ""
            if num:
                raise ValueError(f"number without a unit in {s!r}")
            return total
     """,
    wrong="""
        def parse_duration(s):
            units = {"h": 3600, "m": 60, "s": 1}
            total = 0
            num = ""
            for ch in s:
                if ch.isdigit():
                    num += ch
                else:
                    total += int(num) * units[ch]
                    num = ""
            return total
     """,
    tests={
        "full": "check(parse_duration('1h30m15s'), 5415)",
        "parts": "check(parse_duration('45s'), 45)\ncheck(parse_duration('2h'), 7200)\n"
        "check(parse_duration('10m5s'), 605)",
        "empty": "check(parse_duration(''), 0)",
        "no_unit": "raises(ValueError, parse_duration, '90')",
    },
)

task(
    3,
    "flatten",
    "Flatten arbitrarily nested lists into one flat list, in order. Only lists are flattened; "
    "other values, including tuples and strings, are kept as single items.",
    bug="flattens only one level",
    buggy="""
        def flatten(items):
            out = []
            for x in items:
                if isinstance(x, list):
                    out.extend(x)
                else:
                    out.append(x)
            return out
     """,
    fix="""
        def flatten(items):
            out = []
            for x in items:
                if isinstance(x, list):
                    out.extend(flatten(x))
                else:
                    out.append(x)
            return out
     """,
    wrong="""
        def flatten(items):
            out = []
            for x in items:
                if isinstance(x, (list, tuple)):
                    out.extend(flatten(x))
                else:
                    out.append(x)
            return out
     """,
    tests={
        "deep": "check(flatten([1, [2, [3, [4]]], 5]), [1, 2, 3, 4, 5])",
        "empty_lists": "check(flatten([[], [[]], 1]), [1])",
        "other_values": "check(flatten([(1, 2), 'ab', [3]]), [(1, 2), 'ab', 3])",
    },
)

task(
    3,
    "common_prefix",
    "Return the longest common prefix of the strings in words ('' if there is none or if words is empty).",
    bug="indexes past the end of shorter words",
    buggy="""
        def common_prefix(words):
            for i, ch in enumerate(words[0]):
                for w in words[1:]:
                    if w[i] != ch:
                        return words[0][:i]
            return words[0]
     """,
    fix="""
        def common_prefix(words):
            if not words:
                return ""
            for i, ch in enumerate(words[0]):
                for w in words[1:]:
                    if i >= len(w) or w[i] != ch:
                        return words[0][:i]
            return words[0]
     """,
    wrong="""
        def common_prefix(words):
            for i, ch in enumerate(words[0]):
                for w in words[1:]:
                    if i >= len(w) or w[i] != ch:
                        return words[0][:i]
            return words[0]
     """,
    tests={
        "shared": "check(common_prefix(['interview', 'internet', 'interval']), 'inter')",
        "shorter": "check(common_prefix(['flower', 'flow', 'flight']), 'fl')\n"
        "check(common_prefix(['abc', 'ab']), 'ab')",
        "none": "check(common_prefix(['dog', 'car']), '')\ncheck(common_prefix([]), '')",
    },
)

task(
    3,
    "spiral_order",
    "Return the elements of a rectangular matrix (list of row lists) in clockwise spiral order, "
    "starting at the top-left corner. [[1, 2, 3], [4, 5, 6], [7, 8, 9]] gives [1, 2, 3, 6, 9, 8, 7, 4, 5]; "
    "[] gives [].",
    bug="single remaining rows or columns are walked twice",
    buggy="""
        def spiral_order(matrix):
            out = []
            if not matrix:
                return out
            top, bottom, left, right = 0, len(matrix) - 1, 0, len(matrix[0]) - 1
            while top <= bottom and left <= right:
                for j in range(left, right + 1):
                    out.append(matrix[top][j])
                top += 1
                for i in range(top, bottom + 1):
                    out.append(matrix[i][right])
                right -= 1
                for j in range(right, left - 1, -1):
                    out.append(matrix[bottom][j])
                bottom -= 1
                for i in range(bottom, top - 1, -1):
                    out.append(matrix[i][left])
                left += 1
            return out
     """,
    fix="""
        def spiral_order(matrix):
            out = []
            if not matrix:
                return out
            top, bottom, left, right = 0, len(matrix) - 1, 0, len(matrix[0]) - 1
            while top <= bottom and left <= right:
                for j in range(left, right + 1):
                    out.append(matrix[top][j])
                top += 1
                for i in range(top, bottom + 1):
                    out.append(matrix[i][right])
                right -= 1
                if top <= bottom:
                    for j in range(right, left - 1, -1):
                        out.append(matrix[bottom][j])
                    bottom -= 1
                if left <= right:
                    for i in range(bottom, top - 1, -1):
                        out.append(matrix[i][left])
                    left += 1
            return out
     """,
    wrong="""
        def spiral_order(matrix):
            out = []
            if not matrix:
                return out
            top, bottom, left, right = 0, len(matrix) - 1, 0, len(matrix[0]) - 1
            while top <= bottom and left <= right:
                for j in range(left, right + 1):
                    out.append(matrix[top][j])
                top += 1
                for i in range(top, bottom + 1):
                    out.append(matrix[i][right])
                right -= 1
                if top <= bottom:
                    for j in range(right, left - 1, -1):
                        out.append(matrix[bottom][j])
                    bottom -= 1
                for i in range(bottom, top - 1, -1):
                    out.append(matrix[i][left])
                left += 1
            return out
     """,
    tests={
        "square": "check(spiral_order([[1, 2, 3], [4, 5, 6], [7, 8, 9]]), [1, 2, 3, 6, 9, 8, 7, 4, 5])",
        "wide": "check(spiral_order([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]), "
        "[1, 2, 3, 4, 8, 12, 11, 10, 9, 5, 6, 7])",
        "row": "check(spiral_order([[1, 2, 3]]), [1, 2, 3])",
        "column": "check(spiral_order([[1], [2], [3]]), [1, 2, 3])",
        "empty": "check(spiral_order([]), [])",
    },
)

task(
    3,
    "caesar",
    "Shift every ASCII letter of text by shift places in the alphabet, wrapping around and keeping its "
    "case; other characters are unchanged. shift may be negative or larger than 26. caesar('Zz!', 1) is 'Aa!'.",
    bug="letters are not wrapped around the alphabet",
    buggy="""
        def caesar(text, shift):
            out = []
            for ch in text:
                if ch.isascii() and ch.isalpha():
                    out.append(chr(ord(ch) + shift))
                else:
                    out.append(ch)
            return "".join(out)
     """,
    fix="""
        def caesar(text, shift):
            out = []
            for ch in text:
                if ch.isascii() and ch.isalpha():
                    base = ord("a") if ch.islower() else ord("A")
                    out.append(chr(base + (ord(ch) - base + shift) % 26))
                else:
                    out.append(ch)
            return "".join(out)
     """,
    wrong="""
        def caesar(text, shift):
            out = []
            for ch in text:
                if ch.isascii() and ch.isalpha():
                    out.append(chr(ord("a") + (ord(ch) - ord("a") + shift) % 26))
                else:
                    out.append(ch)
            return "".join(out)
     """,
    tests={
        "simple": "check(caesar('abc', 1), 'bcd')",
        "wrap": "check(caesar('xyz', 3), 'abc')\ncheck(caesar('Zz!', 1), 'Aa!')",
        "negative_and_large": "check(caesar('abc', -1), 'zab')\ncheck(caesar('Hello, World', 29), 'Khoor, Zruog')",
    },
)

task(
    3,
    "word_wrap",
    "Greedily wrap the words of text into lines of at most width characters, words separated by "
    "single spaces; a word longer than width goes on a line of its own. Return the list of lines ([] for text "
    "without words).",
    bug="the space between words is not counted",
    buggy="""
        def word_wrap(text, width):
            lines = []
            line = ""
            for word in text.split():
                if not line:
                    line = word
                elif len(line) + len(word) <= width:
                    line += " " + word
                else:
                    lines.append(line)
                    line = word
            if line:
                lines.append(line)
            return lines
     """,
    fix="""
        def word_wrap(text, width):
            lines = []
            line = ""
            for word in text.split():
                if not line:
                    line = word
                elif len(line) + 1 + len(word) <= width:
                    line += " " + word
                else:
                    lines.append(line)
                    line = word
            if line:
                lines.append(line)
            return lines
     """,
    wrong="""
        def word_wrap(text, width):
            lines = []
            line = ""
            for word in text.split():
                if not line:
                    line = word
                elif len(line) + 1 + len(word) < width:
                    line += " " + word
                else:
                    lines.append(line)
                    line = word
            if line:
                lines.append(line)
            return lines
     """,
    tests={
        "wrap": "check(word_wrap('the quick brown fox jumps', 10), ['the quick', 'brown fox', 'jumps'])",
        "exact_fit": "check(word_wrap('aa bb cc', 5), ['aa bb', 'cc'])",
        "space_counts": "check(word_wrap('aa bb', 4), ['aa', 'bb'])",
        "long_word": "check(word_wrap('a extraordinary b', 5), ['a', 'extraordinary', 'b'])",
        "empty": "check(word_wrap('   ', 4), [])",
    },
)

task(
    3,
    "top_k_words",
    "Return the k most frequent words in the list words, most frequent first; words with equal "
    "counts are ordered alphabetically. If there are fewer than k distinct words, return them all.",
    bug="ties keep first-seen order instead of alphabetical order",
    buggy="""
        from collections import Counter


        def top_k_words(words, k):
            return [w for w, _ in Counter(words).most_common(k)]
     """,
    fix="""
        from collections import Counter


        def top_k_words(words, k):
            counts = Counter(words)
            return sorted(counts, key=lambda w: (-counts[w], w))[:k]
     """,
    wrong="""
        from collections import Counter


        def top_k_words(words, k):
            counts = Counter(words)
            return sorted(counts, key=lambda w: (counts[w], w), reverse=True)[:k]
     """,
    tests={
        "counts": "check(top_k_words(['a', 'b', 'a', 'c', 'a', 'b'], 2), ['a', 'b'])",
        "ties": "check(top_k_words(['pear', 'fig', 'apple', 'fig', 'pear', 'apple'], 2), ['apple', 'fig'])",
        "few": "check(top_k_words(['x'], 3), ['x'])\ncheck(top_k_words([], 2), [])",
    },
)

task(
    3,
    "parse_csv_line",
    "Split one CSV line into its fields. Fields are separated by commas; a field may be "
    "enclosed in double quotes, inside which commas are literal and two double quotes stand for one. "
    "'a,\"b,c\",\"say \"\"hi\"\"\"' gives ['a', 'b,c', 'say \"hi\"']. Empty fields are kept: 'a,,b,' gives "
    "['a', '', 'b', ''].",
    bug="the last field is never added",
    buggy="""
        def parse_csv_line(line):
            fields, field = [], []
            in_quotes = False
            i = 0
            while i < len(line):
                ch = line[i]
                if in_quotes:
                    if ch == '"':
                        if i + 1 < len(line) and line[i + 1] == '"':
                            field.append('"')
                            i += 1
                        else:
                            in_quotes = False
                    else:
                        field.append(ch)
                elif ch == '"':
                    in_quotes = True
                elif ch == ",":
                    fields.append("".join(field))
                    field = []
                else:
                    field.append(ch)
                i += 1
            return fields
     """,
    fix="""
        def parse_csv_line(line):
            fields, field = [], []
            in_quotes = False
            i = 0
            while i < len(line):
                ch = line[i]
                if in_quotes:
                    if ch == '"':
                        if i + 1 < len(line) and line[i + 1] == '"':
                            field.append('"')
                            i += 1
                        else:
                            in_quotes = False
                    else:
                        field.append(ch)
                elif ch == '"':
                    in_quotes = True
                elif ch == ",":
                    fields.append("".join(field))
                    field = []
                else:
                    field.append(ch)
                i += 1
            fields.append("".join(field))
            return fields
     """,
    wrong="""
        def parse_csv_line(line):
            fields, field = [], []
            in_quotes = False
            i = 0
            while i < len(line):
                ch = line[i]
                if in_quotes:
                    if ch == '"':
                        if i + 1 < len(line) and line[i + 1] == '"':
                            field.append('"')
                            i += 1
                        else:
                            in_quotes = False
                    else:
                        field.append(ch)
                elif ch == '"':
                    in_quotes = True
                elif ch == ",":
                    fields.append("".join(field))
                    field = []
                else:
                    field.append(ch)
                i += 1
            if field:
                fields.append("".join(field))
            return fields
     """,
    tests={
        "plain": "check(parse_csv_line('a,b,c'), ['a', 'b', 'c'])",
        "quoted": "check(parse_csv_line('a,\"b,c\",d'), ['a', 'b,c', 'd'])",
        "escaped_quote": 'check(parse_csv_line(\'"say ""hi"""\'), [\'say "hi"\'])',
        "empty_fields": "check(parse_csv_line('a,,b,'), ['a', '', 'b', ''])\ncheck(parse_csv_line(''), [''])",
    },
)

task(
    3,
    "merge_sorted",
    "Merge two sorted lists of numbers into one sorted list (duplicates kept).",
    bug="what is left of the second list is dropped",
    buggy="""
        def merge_sorted(a, b):
            out = []
            i = j = 0
            while i < len(a) and j < len(b):
                if a[i] <= b[j]:
                    out.append(a[i])
                    i += 1
                else:
                    out.append(b[j])
                    j += 1
            return out + a[i:]
     """,
    fix="""
        def merge_sorted(a, b):
            out = []
            i = j = 0
            while i < len(a) and j < len(b):
                if a[i] <= b[j]:
                    out.append(a[i])
                    i += 1
                else:
                    out.append(b[j])
                    j += 1
            return out + a[i:] + b[j:]
     """,
    wrong="""
        def merge_sorted(a, b):
            out = []
            i = j = 0
            while i < len(a) and j < len(b):
                if a[i] <= b[j]:
                    out.append(a[i])
                    i += 1
                else:
                    out.append(b[j])
                    j += 1
            return out + a[i:] + b[i:]
     """,
    tests={
        "interleaved": "check(merge_sorted([1, 4, 6], [2, 3, 5]), [1, 2, 3, 4, 5, 6])",
        "tail_of_b": "check(merge_sorted([1, 2], [3, 4, 5]), [1, 2, 3, 4, 5])",
        "duplicates": "check(merge_sorted([1, 3], [1, 3]), [1, 1, 3, 3])",
        "empty": "check(merge_sorted([], [2, 7]), [2, 7])\ncheck(merge_sorted([], []), [])",
    },
)

task(
    3,
    "valid_ipv4",
    "Return True if s is a dotted IPv4 address: exactly four parts separated by '.', each made of "
    "ASCII digits only, with a value from 0 to 255 and no leading zeros (except '0' itself).",
    bug="int() accepts signs, spaces and leading zeros",
    buggy="""
        def valid_ipv4(s):
            parts = s.split(".")
            if len(parts) != 4:
                return False
            for part in parts:
                try:
                    value = int(part)
                except ValueError:
                    return False
                if not 0 <= value <= 255:
                    return False
            return True
     """,
    fix="""
        def valid_ipv4(s):
            parts = s.split(".")
            if len(parts) != 4:
                return False
            for part in parts:
                if not (part.isascii() and part.isdigit()):
                    return False
                if len(part) > 1 and part[0] == "0":
                    return False
                if int(part) > 255:
                    return False
            return True
     """,
    wrong="""
        def valid_ipv4(s):
            parts = s.split(".")
            if len(parts) != 4:
                return False
            for part in parts:
                if not (part.isascii() and part.isdigit()):
                    return False
                if int(part) > 255:
                    return False
            return True
     """,
    tests={
        "valid": "check(valid_ipv4('192.168.0.1'), True)\ncheck(valid_ipv4('0.0.0.0'), True)\n"
        "check(valid_ipv4('255.255.255.255'), True)",
        "range_and_count": "check(valid_ipv4('256.1.1.1'), False)\ncheck(valid_ipv4('1.2.3'), False)\n"
        "check(valid_ipv4('1.2.3.4.5'), False)",
        "signs_and_spaces": "check(valid_ipv4('1.2.3.+4'), False)\ncheck(valid_ipv4('1. 2.3.4'), False)\n"
        "check(valid_ipv4('1..3.4'), False)",
        "leading_zeros": "check(valid_ipv4('01.2.3.4'), False)\ncheck(valid_ipv4('1.2.3.00'), False)",
    },
)

task(
    3,
    "compress_ranges",
    "Describe a sorted list of distinct integers as comma-separated ranges: runs of two or "
    "more consecutive numbers as 'first-last', single numbers alone. [1, 2, 3, 5, 7, 8] -> '1-3,5,7-8'; "
    "[] -> ''.",
    bug="the final run is never written",
    buggy="""
        def compress_ranges(nums):
            if not nums:
                return ""
            parts = []
            start = prev = nums[0]
            for n in nums[1:]:
                if n == prev + 1:
                    prev = n
                    continue
                parts.append(str(start) if start == prev else f"{start}-{prev}")
                start = prev = n
            return ",".join(parts)
     """,
    fix="""
        def compress_ranges(nums):
            if not nums:
                return ""
            parts = []
            start = prev = nums[0]
            for n in nums[1:]:
                if n == prev + 1:
                    prev = n
                    continue
                parts.append(str(start) if start == prev else f"{start}-{prev}")
                start = prev = n
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            return ",".join(parts)
     """,
    wrong="""
        def compress_ranges(nums):
            if not nums:
                return ""
            parts = []
            start = prev = nums[0]
            for n in nums[1:]:
                if n == prev + 1:
                    prev = n
                    continue
                if prev - start >= 2:
                    parts.append(f"{start}-{prev}")
                else:
                    parts.extend(str(x) for x in range(start, prev + 1))
                start = prev = n
            if prev - start >= 2:
                parts.append(f"{start}-{prev}")
            else:
                parts.extend(str(x) for x in range(start, prev + 1))
            return ",".join(parts)
     """,
    tests={
        "mixed": "check(compress_ranges([1, 2, 3, 5, 7, 8]), '1-3,5,7-8')",
        "single": "check(compress_ranges([4]), '4')\ncheck(compress_ranges([-2, -1, 0]), '-2-0')",
        "pairs": "check(compress_ranges([1, 2, 10, 11]), '1-2,10-11')",
        "empty": "check(compress_ranges([]), '')",
    },
)

task(
    3,
    "matrix_rotate",
    "Return a new matrix (list of row lists) that is the given rectangular matrix rotated 90 "
    "degrees clockwise: [[1, 2], [3, 4]] -> [[3, 1], [4, 2]], [[1, 2, 3]] -> [[1], [2], [3]]; [] -> [].",
    bug="rotates counter-clockwise",
    buggy="""
        def matrix_rotate(matrix):
            if not matrix:
                return []
            rows, cols = len(matrix), len(matrix[0])
            return [[matrix[i][cols - 1 - j] for i in range(rows)] for j in range(cols)]
     """,
    fix="""
        def matrix_rotate(matrix):
            if not matrix:
                return []
            rows, cols = len(matrix), len(matrix[0])
            return [[matrix[rows - 1 - i][j] for i in range(rows)] for j in range(cols)]
     """,
    wrong="""
        def matrix_rotate(matrix):
            if not matrix:
                return []
            rows, cols = len(matrix), len(matrix[0])
            return [[matrix[rows - 1 - i][j] for i in range(cols)] for j in range(rows)]
     """,
    tests={
        "square": "check(matrix_rotate([[1, 2], [3, 4]]), [[3, 1], [4, 2]])",
        "row": "check(matrix_rotate([[1, 2, 3]]), [[1], [2], [3]])",
        "tall": "check(matrix_rotate([[1, 2], [3, 4], [5, 6]]), [[5, 3, 1], [6, 4, 2]])",
        "empty": "check(matrix_rotate([]), [])",
    },
)


# ---------------------------------------------------------------------------------------------------------------

RUNNER = r"""
import json, os, sys, traceback
sys.path.insert(0, os.getcwd())
results = {}
try:
    import test_solution as tests
except BaseException as error:
    print(json.dumps({"import": "".join(traceback.format_exception_only(type(error), error)).strip()}))
    raise SystemExit(0)
for name, value in list(vars(tests).items()):
    if name.startswith("test") and callable(value):
        try:
            value()
            results[name] = "passed"
        except BaseException as error:
            results[name] = "".join(traceback.format_exception_only(type(error), error)).strip()
print(json.dumps(results))
"""


def run_tests(code: str, tests: str, python: str = sys.executable) -> dict[str, str]:
    """Run the tests against ``code`` in a subprocess (not sandboxed: the code here is our own)."""
    with tempfile.TemporaryDirectory() as work:
        Path(work, "solution.py").write_text(code)
        Path(work, "test_solution.py").write_text(tests)
        done = subprocess.run(
            [python, "-I", "-c", RUNNER],
            check=False,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=20,
            env={"PYTHONDONTWRITEBYTECODE": "1"},
        )
        lines = done.stdout.strip().splitlines()
        if done.returncode or not lines:
            return {"run": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
        return json.loads(lines[-1])


def verify(rows: list[dict], python: str = sys.executable) -> list[str]:
    problems = []
    ids, names = Counter(row["id"] for row in rows), Counter(row["function"] for row in rows)
    problems += [f"duplicate id {key}" for key, count in ids.items() if count > 1]
    problems += [f"duplicate function {key}" for key, count in names.items() if count > 1]
    for row in rows:
        fixed = run_tests(row["fix"], row["tests"], python)
        failing = {name: why for name, why in fixed.items() if why != "passed"}
        if failing or not fixed:
            problems.append(f"{row['id']} {row['function']}: the fix fails {failing}")
        for column in ("buggy_code", "wrong_fix"):
            if all(why == "passed" for why in run_tests(row[column], row["tests"], python).values()):
                problems.append(f"{row['id']} {row['function']}: {column} passes every test")
        if row["wrong_fix"].strip() in (row["fix"].strip(), row["buggy_code"].strip()):
            problems.append(f"{row['id']} {row['function']}: wrong_fix repeats another column")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify the tasks without writing the file")
    parser.add_argument("--python", default=sys.executable, help="interpreter to run the tests with")
    args = parser.parse_args()
    problems = verify(TASKS, args.python)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        raise SystemExit(f"{len(problems)} problems; nothing written")
    levels = Counter(row["difficulty"] for row in TASKS)
    summary = ", ".join(f"level {level}: {levels[level]}" for level in sorted(levels))
    if args.check:
        print(f"{len(TASKS)} tasks OK ({summary})")
        return
    OUT_PATH.parent.mkdir(parents=True, exist_ok=True)
    OUT_PATH.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in TASKS))
    print(f"wrote {len(TASKS)} tasks ({summary}) to {OUT_PATH}")


if __name__ == "__main__":
    main()
