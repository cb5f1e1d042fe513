"""Generate the SQL environment's data: one SQLite dump per task family and the task file.

Writes ``data/<family>.sql`` (schema plus rows, plain text) for the four databases (shop, school, library,
flights) and ``data/tasks.jsonl`` (the questions in :mod:`sql_env.tasks`, each with the family's schema).
Every name, city and country is invented; ``random.Random`` with fixed seeds makes the output identical on
every run. Before writing, every task is checked against its database: the reference query runs, returns at
least one row and at most the check's row limit; the wrong query returns a different result under the
check's own comparison; an ordered reference gives the same rows in the same order when SQLite scans
unordered tables backwards (so ties cannot make the order ambiguous).

    python -m sql_env.make_data            # from envs/sql: regenerate data/ in the source tree
    python -m sql_env.make_data --check    # exit 1 if data/ differs from what would be generated
    python -m sql_env.make_data --out DIR  # write somewhere else
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from datetime import date, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sql_env.compare import compare_results
from sql_env.runner import _authorize, load, run_query
from sql_env.tasks import TASKS

FAMILIES = ("shop", "school", "library", "flights")
_HERE = Path(__file__).resolve().parent
# The source tree keeps data/ beside the package; an installed wheel carries it inside the package.
DEFAULT_OUT = _HERE.parent / "data" if (_HERE.parent / "environment.yaml").is_file() else _HERE / "data"
MAX_ROWS = 1000  # the check's default row limit

Table = tuple[str, list[tuple[Any, ...]]]  # (CREATE TABLE statement, rows)

FIRST = [
    "Orla",
    "Teodor",
    "Mirela",
    "Kasimir",
    "Ysolde",
    "Bram",
    "Liesel",
    "Anselm",
    "Quilla",
    "Dorian",
    "Saoirse",
    "Evander",
    "Ilsa",
    "Corwin",
    "Marisol",
    "Tobin",
    "Wrenna",
    "Joaquim",
    "Nerys",
    "Hollis",
    "Petra",
    "Rufus",
    "Alba",
    "Casimir",
]
LAST = [
    "Vantreese",
    "Okafor",
    "Brisbee",
    "Dellacourt",
    "Fenwhistle",
    "Marrowby",
    "Quist",
    "Tallowmere",
    "Ashgrove",
    "Pemberly",
    "Haverkamp",
    "Solvang",
    "Inglethorpe",
    "Castellane",
    "Munroe",
    "Lindqvist",
    "Oyelaran",
    "Petrakis",
]
PLACES = [
    ("Velmora", "Norland"),
    ("Port Ellery", "Norland"),
    ("Bramblewick", "Norland"),
    ("Quenholt", "Estria"),
    ("Saltmere Bay", "Estria"),
    ("Larkspire", "Estria"),
    ("Dunmarrow", "Calvia"),
    ("Eskerby", "Calvia"),
    ("Tovenna", "Calvia"),
    ("Halvermoor", "Norland"),
]


def people(rng: random.Random, n: int) -> list[str]:
    """``n`` different full names."""
    pairs = [(first, last) for first in FIRST for last in LAST]
    return [f"{first} {last}" for first, last in rng.sample(pairs, n)]


def day(rng: random.Random, start: date, end: date) -> date:
    return start + timedelta(days=rng.randint(0, (end - start).days))


def money(value: float) -> float:
    return round(value, 2)


# -- shop ---------------------------------------------------------------------------------------------------

SHOP_PRODUCTS = {
    "Books": [
        "Atlas of Rivers",
        "Garden Almanac",
        "Night Sky Guide",
        "Pocket Thesaurus",
        "Sourdough Handbook",
        "Tide Tables 2025",
    ],
    "Electronics": [
        "Bluetooth Speaker",
        "E-Reader",
        "Noise-Cancelling Headphones",
        "Smart Thermostat",
        "USB-C Dock",
        "Webcam HD",
    ],
    "Garden": ["Bird Feeder", "Compost Bin", "Hose Reel", "Pruning Shears", "Seed Starter Kit", "Trellis Panel"],
    "Kitchen": ["Cast Iron Skillet", "Chef Knife", "Coffee Grinder", "Dutch Oven", "Salad Spinner", "Stand Mixer"],
    "Toys": ["Building Blocks", "Jigsaw Puzzle 1000", "Kite", "Marble Run", "Plush Fox", "Wooden Train Set"],
}
SHOP_PRICE = {"Books": (6, 45), "Electronics": (25, 320), "Garden": (8, 140), "Kitchen": (12, 260), "Toys": (7, 90)}


def shop(rng: random.Random) -> list[Table]:
    names = people(rng, 36)
    customers = []
    for index, name in enumerate(names, start=1):
        city, country = rng.choice(PLACES)
        customers.append((index, name, city, country, day(rng, date(2022, 1, 1), date(2024, 12, 31)).isoformat()))
    products = []
    for category, items in SHOP_PRODUCTS.items():
        low, high = SHOP_PRICE[category]
        for item in items:
            stock = rng.choice([0, 0, 3, 8, 15, 40, 75, 120]) if rng.random() < 0.5 else rng.randint(1, 150)
            products.append((len(products) + 1, item, category, money(rng.uniform(low, high)), stock))
    never_ordered = {products[i][0] for i in rng.sample(range(len(products)), 3)}
    buyers = [c[0] for c in customers]
    no_orders = set(rng.sample(buyers, 5))
    buyers = [c for c in buyers if c not in no_orders]
    weights = [rng.choice([1, 1, 2, 3, 5]) for _ in buyers]
    orders, items = [], []
    statuses = ["delivered"] * 12 + ["shipped"] * 3 + ["pending"] * 2 + ["cancelled"] * 3
    sellable = [p for p in products if p[0] not in never_ordered]
    for order_id in range(1, 181):
        customer = rng.choices(buyers, weights)[0]
        orders.append(
            (order_id, customer, day(rng, date(2024, 1, 1), date(2025, 6, 30)).isoformat(), rng.choice(statuses))
        )
        for product in sorted(rng.sample(sellable, rng.choice([1, 1, 2, 2, 3, 4])), key=lambda p: p[0]):
            price = product[3] if rng.random() < 0.85 else money(product[3] * 0.9)
            items.append((order_id, product[0], rng.choice([1, 1, 1, 2, 2, 3, 5]), price))
    return [
        (
            "CREATE TABLE customers (\n  customer_id INTEGER PRIMARY KEY,\n  name TEXT NOT NULL,\n  city TEXT NOT NULL,\n"
            "  country TEXT NOT NULL,\n  signup_date TEXT NOT NULL  -- YYYY-MM-DD\n)",
            customers,
        ),
        (
            "CREATE TABLE products (\n  product_id INTEGER PRIMARY KEY,\n  name TEXT NOT NULL,\n  category TEXT NOT NULL,\n"
            "  price REAL NOT NULL,\n  stock INTEGER NOT NULL  -- units in the warehouse\n)",
            products,
        ),
        (
            "CREATE TABLE orders (\n  order_id INTEGER PRIMARY KEY,\n  customer_id INTEGER NOT NULL REFERENCES customers,\n"
            "  order_date TEXT NOT NULL,  -- YYYY-MM-DD\n  status TEXT NOT NULL  -- delivered, shipped, pending or cancelled\n)",
            orders,
        ),
        (
            "CREATE TABLE order_items (\n  order_id INTEGER NOT NULL REFERENCES orders,\n"
            "  product_id INTEGER NOT NULL REFERENCES products,\n  quantity INTEGER NOT NULL,\n"
            "  unit_price REAL NOT NULL,  -- price paid per unit\n  PRIMARY KEY (order_id, product_id)\n)",
            items,
        ),
    ]


# -- school -------------------------------------------------------------------------------------------------

SCHOOL_DEPARTMENTS = [
    ("Mathematics", "Euler Hall"),
    ("Physics", "Curie Building"),
    ("History", "Tacitus House"),
    ("Literature", "Austen Wing"),
    ("Computer Science", "Lovelace Lab"),
    ("Philosophy", "Hume Annex"),
]
SCHOOL_COURSES = [
    ("MATH101", "Calculus I", 1, 5),
    ("MATH102", "Linear Algebra", 1, 5),
    ("MATH210", "Probability", 1, 4),
    ("MATH305", "Number Theory", 1, 3),
    ("PHYS101", "Mechanics", 2, 5),
    ("PHYS150", "Waves and Optics", 2, 4),
    ("PHYS220", "Thermodynamics", 2, 4),
    ("HIST110", "Ancient Civilizations", 3, 3),
    ("HIST205", "Medieval Trade Routes", 3, 3),
    ("HIST330", "History of Science", 3, 2),
    ("LIT120", "Poetry Workshop", 4, 3),
    ("LIT240", "The Modern Novel", 4, 4),
    ("LIT310", "Drama and Stage", 4, 2),
    ("CS101", "Programming Basics", 5, 5),
    ("CS201", "Data Structures", 5, 5),
    ("CS230", "Databases", 5, 4),
    ("CS340", "Operating Systems", 5, 4),
    ("CS399", "Compiler Seminar", 5, 2),
]
TERMS = ["2024-fall", "2025-spring"]


def school(rng: random.Random) -> list[Table]:
    departments = [(i, name, building) for i, (name, building) in enumerate(SCHOOL_DEPARTMENTS, start=1)]
    teacher_names = people(rng, 12)
    teacher_depts = [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 5, 6]
    teachers = [
        (i, name, dept, rng.randint(2001, 2022))
        for i, (name, dept) in enumerate(zip(teacher_names, teacher_depts, strict=True), start=1)
    ]
    courses = []
    for index, (code, title, dept, credits) in enumerate(SCHOOL_COURSES, start=1):
        staff = [t[0] for t in teachers if t[2] == dept]
        teacher = staff[0] if code.endswith("101") else rng.choice(staff)
        courses.append((index, code, title, dept, teacher, credits))
    students = []
    for index, name in enumerate(people(rng, 64), start=1):
        major = None if rng.random() < 0.1 else rng.choice([1, 1, 2, 3, 4, 5, 5, 6])
        students.append((index, name, rng.randint(1, 4), major, rng.randint(2021, 2024)))
    empty_course = courses[-1][0]  # the compiler seminar is new: nobody has enrolled yet
    idle = set(rng.sample([s[0] for s in students], 4))  # on leave: no enrollments
    enrollments = []
    for student in students:
        if student[0] in idle:
            continue
        for term in TERMS:
            for course in sorted(rng.sample([c for c in courses if c[0] != empty_course], rng.randint(1, 4))):
                grade: int | None = min(100, max(35, int(rng.gauss(72, 14))))
                if rng.random() < (0.05 if term == TERMS[0] else 0.15):
                    grade = None
                enrollments.append((student[0], course[0], term, grade))
    return [
        (
            "CREATE TABLE departments (\n  dept_id INTEGER PRIMARY KEY,\n  name TEXT NOT NULL,\n  building TEXT NOT NULL\n)",
            departments,
        ),
        (
            "CREATE TABLE teachers (\n  teacher_id INTEGER PRIMARY KEY,\n  name TEXT NOT NULL,\n"
            "  dept_id INTEGER NOT NULL REFERENCES departments,\n  hire_year INTEGER NOT NULL\n)",
            teachers,
        ),
        (
            "CREATE TABLE courses (\n  course_id INTEGER PRIMARY KEY,\n  code TEXT NOT NULL UNIQUE,\n  title TEXT NOT NULL,\n"
            "  dept_id INTEGER NOT NULL REFERENCES departments,\n  teacher_id INTEGER NOT NULL REFERENCES teachers,\n"
            "  credits INTEGER NOT NULL\n)",
            courses,
        ),
        (
            "CREATE TABLE students (\n  student_id INTEGER PRIMARY KEY,\n  name TEXT NOT NULL,\n"
            "  year INTEGER NOT NULL,  -- year of study, 1 to 4\n"
            "  major_dept_id INTEGER REFERENCES departments,  -- NULL: no major declared yet\n"
            "  entry_year INTEGER NOT NULL\n)",
            students,
        ),
        (
            "CREATE TABLE enrollments (\n  student_id INTEGER NOT NULL REFERENCES students,\n"
            "  course_id INTEGER NOT NULL REFERENCES courses,\n  term TEXT NOT NULL,  -- '2024-fall' or '2025-spring'\n"
            "  grade INTEGER,  -- 0 to 100; NULL: not graded yet\n  PRIMARY KEY (student_id, course_id, term)\n)",
            enrollments,
        ),
    ]


# -- library ------------------------------------------------------------------------------------------------

GENRES = ["Fantasy", "Mystery", "History", "Science", "Poetry", "Romance"]
TITLE_A = [
    "Silent",
    "Crimson",
    "Hidden",
    "Last",
    "Winter",
    "Golden",
    "Broken",
    "Distant",
    "Hollow",
    "Painted",
    "Salt",
    "Iron",
    "Seventh",
    "Quiet",
    "Burning",
]
TITLE_B = [
    "Harbor",
    "Orchard",
    "Cartographer",
    "Lantern",
    "Archive",
    "Tide",
    "Meridian",
    "Garden",
    "Ledger",
    "Tower",
    "Compass",
    "Valley",
    "Clockmaker",
    "Bridge",
]
AUTHOR_COUNTRIES = ["Norland", "Estria", "Calvia", "Ostmark", "Veridia"]


def library(rng: random.Random) -> list[Table]:
    authors = [
        (i, name, rng.choice(AUTHOR_COUNTRIES), rng.randint(1921, 1990))
        for i, name in enumerate(people(rng, 20), start=1)
    ]
    prolific = [a[0] for a in authors[:6]]
    pairs = rng.sample([(a, b) for a in TITLE_A for b in TITLE_B], 64)
    books = []
    for index, (a, b) in enumerate(pairs, start=1):
        author = rng.choice(prolific) if rng.random() < 0.5 else rng.choice([x[0] for x in authors])
        books.append((index, f"The {a} {b}", author, rng.choice(GENRES), rng.randint(1950, 2024), rng.randint(90, 880)))
    members = []
    for index, name in enumerate(people(rng, 44), start=1):
        city = rng.choice(PLACES)[0]
        members.append(
            (
                index,
                name,
                city,
                day(rng, date(2019, 1, 1), date(2024, 12, 31)).isoformat(),
                "premium" if rng.random() < 0.3 else "standard",
            )
        )
    never_borrowed = set(rng.sample([b[0] for b in books], 5))
    lendable = [b[0] for b in books if b[0] not in never_borrowed]
    popularity = [rng.choice([1, 1, 2, 3, 6]) for _ in lendable]
    readers = [m[0] for m in members]
    inactive = set(rng.sample(readers, 4))
    readers = [m for m in readers if m not in inactive]
    loans = []
    for loan_id in range(1, 241):
        lent = day(rng, date(2024, 1, 1), date(2025, 6, 20))
        due = lent + timedelta(days=21)
        returned = None if rng.random() < 0.12 else (lent + timedelta(days=rng.randint(2, 34))).isoformat()
        loans.append(
            (
                loan_id,
                rng.choices(lendable, popularity)[0],
                rng.choice(readers),
                lent.isoformat(),
                due.isoformat(),
                returned,
            )
        )
    return [
        (
            "CREATE TABLE authors (\n  author_id INTEGER PRIMARY KEY,\n  name TEXT NOT NULL,\n  country TEXT NOT NULL,\n"
            "  birth_year INTEGER NOT NULL\n)",
            authors,
        ),
        (
            "CREATE TABLE books (\n  book_id INTEGER PRIMARY KEY,\n  title TEXT NOT NULL,\n"
            "  author_id INTEGER NOT NULL REFERENCES authors,\n  genre TEXT NOT NULL,\n  published_year INTEGER NOT NULL,\n"
            "  pages INTEGER NOT NULL\n)",
            books,
        ),
        (
            "CREATE TABLE members (\n  member_id INTEGER PRIMARY KEY,\n  name TEXT NOT NULL,\n  city TEXT NOT NULL,\n"
            "  joined_date TEXT NOT NULL,  -- YYYY-MM-DD\n  membership TEXT NOT NULL  -- 'standard' or 'premium'\n)",
            members,
        ),
        (
            "CREATE TABLE loans (\n  loan_id INTEGER PRIMARY KEY,\n  book_id INTEGER NOT NULL REFERENCES books,\n"
            "  member_id INTEGER NOT NULL REFERENCES members,\n  loan_date TEXT NOT NULL,  -- YYYY-MM-DD\n"
            "  due_date TEXT NOT NULL,  -- YYYY-MM-DD\n  return_date TEXT  -- YYYY-MM-DD; NULL: not returned yet\n)",
            loans,
        ),
    ]


# -- flights ------------------------------------------------------------------------------------------------

AIRPORTS = [
    ("VEL", "Velmora International", "Velmora", "Norland"),
    ("PEL", "Port Ellery Harbour", "Port Ellery", "Norland"),
    ("HVM", "Halvermoor Field", "Halvermoor", "Norland"),
    ("QNH", "Quenholt Central", "Quenholt", "Estria"),
    ("SMB", "Saltmere Bay Airport", "Saltmere Bay", "Estria"),
    ("LKS", "Larkspire Regional", "Larkspire", "Estria"),
    ("DNM", "Dunmarrow Airport", "Dunmarrow", "Calvia"),
    ("ESK", "Eskerby North", "Eskerby", "Calvia"),
    ("TVN", "Tovenna Airfield", "Tovenna", "Calvia"),
    ("OST", "Ostburg Gateway", "Ostburg", "Ostmark"),
    ("RVF", "Riven Falls Airport", "Riven Falls", "Ostmark"),
    ("AMK", "Amberkeep Airstrip", "Amberkeep", "Veridia"),
]
AIRLINES = [
    ("NA", "Norair", "Norland"),
    ("ES", "Estria Skyways", "Estria"),
    ("CV", "Calvia Air", "Calvia"),
    ("OX", "Ostmark Express", "Ostmark"),
    ("BW", "Bluewing", "Estria"),
    ("LF", "Lumenflight", "Norland"),
]
COORDS = {
    "VEL": (0, 0),
    "PEL": (310, 120),
    "HVM": (-180, 260),
    "QNH": (820, -140),
    "SMB": (1040, 210),
    "LKS": (700, 380),
    "DNM": (-420, -700),
    "ESK": (-150, -980),
    "TVN": (-600, -430),
    "OST": (1500, 900),
    "RVF": (1320, 1310),
    "AMK": (2100, -350),
}


def flights(rng: random.Random) -> list[Table]:
    airports = list(AIRPORTS)
    airlines = list(AIRLINES)
    codes = [a[0] for a in airports if a[0] != "AMK"]  # Amberkeep's runway is closed this season: no flights
    routes = sorted({(a, b) for a in codes for b in codes if a != b})
    served = rng.sample(routes, 26) + [("VEL", "QNH"), ("QNH", "VEL")]
    served = sorted(set(served))
    fleet = [a[0] for a in airlines]
    rows = []
    used_numbers: set[str] = set()
    for flight_id in range(1, 141):
        origin, destination = rng.choice(served)
        airline = rng.choice(fleet)
        while True:
            number = f"{airline}{rng.randint(100, 999)}"
            if number not in used_numbers:
                used_numbers.add(number)
                break
        (x1, y1), (x2, y2) = COORDS[origin], COORDS[destination]
        distance = round(((x1 - x2) ** 2 + (y1 - y2) ** 2) ** 0.5)
        duration = 30 + round(distance / 12) + rng.randint(-5, 15)
        departure = (
            day(rng, date(2025, 3, 1), date(2025, 5, 31)).isoformat()
            + f" {rng.randint(5, 22):02d}:{rng.choice([0, 15, 30, 45]):02d}"
        )
        rows.append(
            (
                flight_id,
                number,
                airline,
                origin,
                destination,
                departure,
                duration,
                distance,
                rng.choice([90, 120, 150, 180]),
            )
        )
    passengers = [
        (i, name, rng.choice(PLACES)[1], rng.randint(1950, 2006)) for i, name in enumerate(people(rng, 90), start=1)
    ]
    cancelled_sales = set(rng.sample([f[0] for f in rows], 6))  # flights that have not sold a seat yet
    sold = [f for f in rows if f[0] not in cancelled_sales]
    frequent = [p[0] for p in passengers]
    weights = [rng.choice([1, 1, 1, 2, 4]) for _ in frequent]
    bookings = []
    for booking_id in range(1, 561):
        flight = rng.choice(sold)
        cabin = rng.choices(["economy", "business", "first"], [80, 16, 4])[0]
        base = 40 + flight[7] * 0.11
        fare = money(base * {"economy": 1.0, "business": 2.6, "first": 4.1}[cabin] * rng.uniform(0.8, 1.3))
        bookings.append((booking_id, flight[0], rng.choices(frequent, weights)[0], cabin, fare))
    return [
        (
            "CREATE TABLE airports (\n  code TEXT PRIMARY KEY,  -- three letters\n  name TEXT NOT NULL,\n  city TEXT NOT NULL,\n"
            "  country TEXT NOT NULL\n)",
            airports,
        ),
        (
            "CREATE TABLE airlines (\n  code TEXT PRIMARY KEY,  -- two letters\n  name TEXT NOT NULL,\n  country TEXT NOT NULL\n)",
            airlines,
        ),
        (
            "CREATE TABLE flights (\n  flight_id INTEGER PRIMARY KEY,\n  flight_no TEXT NOT NULL UNIQUE,\n"
            "  airline_code TEXT NOT NULL REFERENCES airlines,\n  origin TEXT NOT NULL REFERENCES airports,\n"
            "  destination TEXT NOT NULL REFERENCES airports,\n  departure TEXT NOT NULL,  -- 'YYYY-MM-DD HH:MM'\n"
            "  duration_min INTEGER NOT NULL,\n  distance_km INTEGER NOT NULL,\n  capacity INTEGER NOT NULL  -- seats\n)",
            rows,
        ),
        (
            "CREATE TABLE passengers (\n  passenger_id INTEGER PRIMARY KEY,\n  name TEXT NOT NULL,\n  country TEXT NOT NULL,\n"
            "  birth_year INTEGER NOT NULL\n)",
            passengers,
        ),
        (
            "CREATE TABLE bookings (\n  booking_id INTEGER PRIMARY KEY,\n  flight_id INTEGER NOT NULL REFERENCES flights,\n"
            "  passenger_id INTEGER NOT NULL REFERENCES passengers,\n  cabin TEXT NOT NULL,  -- economy, business or first\n"
            "  fare REAL NOT NULL\n)",
            bookings,
        ),
    ]


BUILDERS = {"shop": (shop, 101), "school": (school, 202), "library": (library, 303), "flights": (flights, 404)}


# -- writing and checking -----------------------------------------------------------------------------------


def literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        raise TypeError("no booleans in the dumps")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def table_name(create: str) -> str:
    return create.split()[2]


def dump_text(family: str, tables: list[Table]) -> str:
    lines = [
        f"-- {family} database for the verihub sql environment. Generated by sql_env/make_data.py; do not edit.",
        "BEGIN TRANSACTION;",
    ]
    for create, rows in tables:
        lines.append(create + ";")
        name = table_name(create)
        lines += [f"INSERT INTO {name} VALUES ({', '.join(literal(v) for v in row)});" for row in rows]
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


def schema_text(tables: list[Table]) -> str:
    return ";\n".join(create for create, _ in tables) + ";"


def build() -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The dumps by family and the task rows."""
    dumps, schemas = {}, {}
    for family in FAMILIES:
        builder, seed = BUILDERS[family]
        tables = builder(random.Random(seed))
        dumps[family] = dump_text(family, tables)
        schemas[family] = schema_text(tables)
    rows = []
    counters: Counter[str] = Counter()
    for task in TASKS:
        counters[task["family"]] += 1
        rows.append(
            {
                "id": f"sql-{task['family']}-{counters[task['family']]:02d}",
                "family": task["family"],
                "difficulty": task["difficulty"],
                "ordered": task["ordered"],
                "main_table": task["main_table"],
                "question": task["question"],
                "query": task["query"],
                "wrong_query": task["wrong_query"],
                "schema": schemas[task["family"]],
            }
        )
    return dumps, rows


def verify(dumps: dict[str, str], rows: list[dict[str, Any]]) -> list[str]:
    """Problems with the tasks (empty when all is well)."""
    problems = []
    connections = {family: load(text) for family, text in dumps.items()}
    for row in rows:
        connection, where = connections[row["family"]], row["id"]
        for field in ("query", "wrong_query", "question"):
            if "{" in row[field] or "}" in row[field]:
                problems.append(f"{where}: braces in {field} (the gold templates would read them as placeholders)")
        reference = run_query(connection, row["query"], MAX_ROWS, 5.0)
        wrong = run_query(connection, row["wrong_query"], MAX_ROWS, 5.0)
        if "error" in reference:
            problems.append(f"{where}: the reference fails: {reference['message']}")
            continue
        if not reference["rows"]:
            problems.append(f"{where}: the reference returns no rows")
        if "error" not in wrong:
            same, _ = compare_results(
                reference["rows"],
                wrong["rows"],
                ordered=row["ordered"],
                expected_columns=len(reference["columns"]),
                got_columns=len(wrong["columns"]),
            )
            if same:
                problems.append(f"{where}: the wrong query returns the same result")
        if row["ordered"]:
            if "ORDER BY" not in row["query"].upper():
                problems.append(f"{where}: ordered, but the reference has no ORDER BY")
            if len(reference["rows"]) < 2:
                problems.append(f"{where}: ordered, but the reference returns fewer than two rows")
            connection.set_authorizer(None)
            connection.execute("PRAGMA reverse_unordered_selects = ON")
            again = run_query(connection, row["query"], MAX_ROWS, 5.0)
            connection.execute("PRAGMA reverse_unordered_selects = OFF")
            connection.set_authorizer(_authorize)
            same, why = compare_results(reference["rows"], again["rows"], ordered=True)
            if not same:
                problems.append(f"{where}: the reference's order depends on ties ({why})")
        elif "LIMIT" in row["query"].upper():
            problems.append(f"{where}: LIMIT in an unordered task")
    counts = Counter((row["family"], row["difficulty"]) for row in rows)
    for family in FAMILIES:
        for difficulty in (1, 2, 3):
            if not counts[family, difficulty]:
                problems.append(f"{family}: no tasks of difficulty {difficulty}")
    ids = Counter(row["id"] for row in rows)
    problems += [f"duplicate id {task_id}" for task_id, n in ids.items() if n > 1]
    return problems


def render(dumps: dict[str, str], rows: list[dict[str, Any]]) -> dict[str, str]:
    files = {f"{family}.sql": text for family, text in dumps.items()}
    files["tasks.jsonl"] = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="directory to write (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    args = parser.parse_args(argv)
    dumps, rows = build()
    problems = verify(dumps, rows)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    files = render(dumps, rows)
    if args.check:
        stale = [
            name
            for name, text in files.items()
            if not (args.out / name).is_file() or (args.out / name).read_text(encoding="utf-8") != text
        ]
        if stale:
            print(f"out of date in {args.out}: {', '.join(stale)}", file=sys.stderr)
            return 1
        print(f"{args.out}: up to date ({len(rows)} tasks)")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text, encoding="utf-8")
    per_family = Counter(row["family"] for row in rows)
    print(
        f"wrote {len(rows)} tasks ({', '.join(f'{f} {n}' for f, n in per_family.items())}) and "
        f"{len(dumps)} dumps to {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
