"""Generate envs/json-extract/data/records.jsonl: short paragraphs about invented entities plus the fields to extract.

Each row describes one person, company or event. The wording comes from hand-written templates; the order of the
follow-up facts is shuffled, and some rows add distractor sentences with decoy values of the same type. Every name,
city, company and venue is made up. ``random.Random(SEED)`` makes the output deterministic.
Regenerate (overwrites the file) with: ``python envs/json-extract/scripts/make_data.py``
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

SEED = 20261130
PER_KIND_AND_DIFFICULTY = 14  # 3 kinds x 3 difficulties x 14 = 126 rows
OUT_PATH = Path(__file__).resolve().parent.parent / "data" / "records.jsonl"

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
]
LAST = [
    "Vantreese",
    "Okonkwo-Hale",
    "Brisbee",
    "Dellacourt",
    "Fenwhistle",
    "Marrowby",
    "Quist",
    "Tallowmere",
    "Ashgrove",
    "Pemberly-Ruiz",
    "Haverkamp",
    "Solvang",
    "Inglethorpe",
    "Castellane",
    "Munroe-Vick",
]
CITIES = [
    "Velmora",
    "Port Ellery",
    "Bramblewick",
    "Quenholt",
    "Saltmere Bay",
    "Larkspire",
    "Dunmarrow",
    "Eskerby",
    "Tovenna",
    "Halvermoor",
    "Corvana",
    "Fennick Cross",
    "Westerlyn",
    "Amberkeep",
    "Riven Falls",
    "Ostrel Vale",
]
OCCUPATIONS = [
    "marine biologist",
    "pastry chef",
    "tax accountant",
    "museum curator",
    "bridge engineer",
    "veterinarian",
    "librarian",
    "airline pilot",
    "furniture maker",
    "speech therapist",
    "pharmacist",
    "geologist",
    "urban planner",
    "orchestra conductor",
    "data analyst",
    "beekeeper",
]
CO_STEMS = [
    "Quillstone",
    "Brackenridge",
    "Luminar",
    "Northwake",
    "Cobaltine",
    "Harrowfield",
    "Tessellate",
    "Vireo",
    "Ambergate",
    "Solquist",
    "Drummond & Pike",
    "Kestrelwood",
    "Marlowe-Yates",
    "Ondine",
]
CO_SUFFIXES = ["Analytics", "Foods", "Robotics", "Textiles", "Logistics", "Biotech", "Energy", "Software", "Optics"]
EVENT_TOPICS = ["Jazz", "Robotics", "Poetry", "Cheese", "Lantern", "Chess", "Kite", "Film", "Folk Dance", "Startup"]
EVENT_TYPES = ["Festival", "Summit", "Expo", "Fair", "Symposium", "Gala", "Convention"]
VENUES = [
    "Orrin Exhibition Hall",
    "Calder Park Arena",
    "Vantiel Convention Center",
    "Meadowlight Amphitheater",
    "Grisholm Civic Hall",
    "Pelloway Stadium",
    "Sablewood Pavilion",
    "Harbor Nine Forum",
    "Kettering Dome",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]

Decoy = tuple[str, str, object]  # (distractor sentence, field it imitates, decoy value)
Sample = tuple[dict[str, object], dict[str, str], list[Decoy]]  # (expected values, text slots, decoys)


@dataclass(frozen=True)
class Kind:
    fields: tuple[str, ...]
    templates: tuple[tuple[str, ...], ...]  # first sentence introduces the entity; the rest are shuffled
    unusual: str  # a single sentence with all facts in unusual phrasing (difficulty 3 only)
    sample: Callable[[random.Random], Sample]


def an(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def count(r: random.Random, n: int) -> str:
    """Write a count in digits, usually with thousands separators when it has them."""
    return f"{n:,}" if n >= 1000 and r.random() < 0.75 else str(n)


def random_date(r: random.Random) -> date:
    return date(r.randint(2012, 2025), r.randint(1, 12), r.randint(1, 28))


def spoken(d: date) -> str:
    return f"{MONTHS[d.month - 1]} {d.day}, {d.year}"


def sample_person(r: random.Random) -> Sample:
    first, last = r.choice(FIRST), r.choice(LAST)
    other, other2 = (f"{f} {r.choice(LAST)}" for f in r.sample([f for f in FIRST if f != first], 2))
    age, age2 = r.sample(range(21, 80), 2)
    city, city2 = r.sample(CITIES, 2)
    job, job2 = r.sample(OCCUPATIONS, 2)
    relation = r.choice(["sister", "cousin", "neighbor", "business partner", "oldest friend"])
    expected: dict[str, object] = {"name": f"{first} {last}", "age": age, "city": city, "occupation": job}
    slots = {"name": f"{first} {last}", "first": first, "age": str(age), "city": city, "job": job, "a_job": an(job)}
    decoys: list[Decoy] = [
        (f"{first}'s {relation}, {other}, is {age2} years old.", "age", age2),
        (f"Before settling down, {first} spent several years in {city2}.", "city", city2),
        (f"Early on, {first} trained to become {an(job2)} but changed course.", "occupation", job2),
        (f"{first} shares a workshop with {other2}.", "name", other2),
    ]
    return expected, slots, decoys


def sample_company(r: random.Random) -> Sample:
    (stem, stem2, stem3), suffix = r.sample(CO_STEMS, 3), r.choice(CO_SUFFIXES)
    founded, founded2 = r.sample(range(1950, 2021), 2)
    hq, city2 = r.sample(CITIES, 2)
    staff = r.choice([r.randint(15, 950), r.randint(1000, 99000)])
    staff2 = staff * r.randint(3, 9) + r.randint(1, 99)
    expected: dict[str, object] = {
        "name": f"{stem} {suffix}",
        "founded": founded,
        "headquarters": hq,
        "employees": staff,
    }
    slots = {"name": f"{stem} {suffix}", "founded": str(founded), "hq": hq, "staff": count(r, staff)}
    decoys: list[Decoy] = [
        (f"Its closest rival, {stem2} {suffix}, was founded in {founded2}.", "founded", founded2),
        (f"The company also runs a regional office in {city2}.", "headquarters", city2),
        (f"Its parent group employs {count(r, staff2)} people worldwide.", "employees", staff2),
        (f"In its early years it traded under the name {stem3} Works.", "name", f"{stem3} Works"),
    ]
    return expected, slots, decoys


def sample_event(r: random.Random) -> Sample:
    place, place2 = r.sample(CITIES, 2)
    (topic, topic2), kind = r.sample(EVENT_TOPICS, 2), r.choice(EVENT_TYPES)
    when = random_date(r)
    later = when + timedelta(days=r.randint(20, 400))
    venue, venue2, venue3 = r.sample(VENUES, 3)
    crowd = r.choice([r.randint(40, 990), r.randint(1000, 60000)])
    crowd2 = crowd + r.randint(5, max(6, crowd // 3))
    expected: dict[str, object] = {
        "name": f"{place} {topic} {kind}",
        "date": when.isoformat(),
        "venue": venue,
        "attendees": crowd,
    }
    slots = {"name": f"{place} {topic} {kind}", "date": spoken(when), "venue": venue, "crowd": count(r, crowd)}
    decoys: list[Decoy] = [
        (f"A follow-up gathering is planned for {spoken(later)}.", "date", later.isoformat()),
        (f"The previous edition, held at {venue3}, drew {count(r, crowd2)} visitors.", "attendees", crowd2),
        (f"An after-party took place at {venue2}.", "venue", venue2),
        (f"It is often confused with the {place2} {topic2} {kind}.", "name", f"{place2} {topic2} {kind}"),
    ]
    return expected, slots, decoys


KINDS: dict[str, Kind] = {
    "person": Kind(
        ("name", "age", "city", "occupation"),
        (
            ("{name} is a {age}-year-old {job}.", "{first} lives in {city}."),
            ("{name} works as {a_job} in {city}.", "{first} is {age} years old."),
            ("{name}, {age}, lives in {city}.", "By profession, {first} is {a_job}."),
            ("{name} is {a_job}.", "{first} is {age} years old.", "{first}'s home is in {city}."),
        ),
        "{city} resident {name}, {a_job} by trade, celebrated birthday number {age} last month.",
        sample_person,
    ),
    "company": Kind(
        ("name", "founded", "headquarters", "employees"),
        (
            ("{name} was founded in {founded}.", "The company is headquartered in {hq} and employs {staff} people."),
            ("Headquartered in {hq}, {name} has {staff} employees.", "It was established in {founded}."),
            (
                "{name} has been in business since {founded}.",
                "Its head office is in {hq}.",
                "Today it has a staff of {staff}.",
            ),
            ("{name}, based in {hq}, was set up in {founded}.", "It now employs {staff} people."),
        ),
        "Staffed by {staff} people and run from {hq}, {name} traces its roots back to {founded}.",
        sample_company,
    ),
    "event": Kind(
        ("name", "date", "venue", "attendees"),
        (
            ("The {name} took place on {date} at {venue}.", "Organizers counted {crowd} attendees."),
            ("{venue} hosted the {name} on {date}.", "A total of {crowd} people attended."),
            ("The {name} drew {crowd} attendees.", "It was held at {venue}.", "The event took place on {date}."),
            ("On {date}, the {name} opened its doors at {venue}.", "Attendance reached {crowd}."),
        ),
        "It was {date} when {crowd} ticket holders streamed into {venue} for the {name}.",
        sample_event,
    ),
}


def compose(
    r: random.Random, kind: Kind, slots: dict[str, str], decoys: list[Decoy], difficulty: int, unusual: bool
) -> str:
    """Build the paragraph: the lead sentence first, then shuffled facts with decoys at random positions."""
    if unusual:
        sentences = [kind.unusual.format(**slots)]
    else:
        max_facts = 2 if difficulty == 3 else 3  # keep every paragraph at 2-4 sentences
        template = r.choice([t for t in kind.templates if len(t) <= max_facts])
        rest = [s.format(**slots) for s in template[1:]]
        r.shuffle(rest)
        sentences = [template[0].format(**slots), *rest]
    for sentence, _, _ in decoys:
        sentences.insert(r.randint(1, len(sentences)), sentence)
    return " ".join(s[0].upper() + s[1:] for s in sentences)


def make_row(r: random.Random, kind_name: str, difficulty: int, unusual: bool) -> tuple[str, dict[str, object]]:
    kind = KINDS[kind_name]
    expected, slots, candidates = kind.sample(r)
    n_decoys = {1: 0, 2: 1, 3: 1 if unusual else 2}[difficulty]
    decoys = r.sample(candidates, n_decoys)
    _, field, value = decoys[0] if decoys else r.choice(candidates)
    wrong = {**expected, field: value}
    assert wrong != expected and list(expected) == list(kind.fields)
    return str(expected["name"]), {
        "kind": kind_name,
        "text": compose(r, kind, slots, decoys, difficulty, unusual),
        "fields": ", ".join(kind.fields),
        "expected": json.dumps(expected, ensure_ascii=False),
        "wrong": json.dumps(wrong, ensure_ascii=False),
        "difficulty": difficulty,
    }


def generate(rng: random.Random) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    seen_names: set[str] = set()
    seen_texts: set[str] = set()
    for difficulty in (1, 2, 3):
        for kind_name in KINDS:
            made = 0
            while made < PER_KIND_AND_DIFFICULTY:
                unusual = difficulty == 3 and made % 2 == 0
                name, row = make_row(rng, kind_name, difficulty, unusual)
                if name in seen_names or row["text"] in seen_texts:
                    continue
                seen_names.add(name)
                seen_texts.add(str(row["text"]))
                rows.append(row)
                made += 1
    rng.shuffle(rows)
    return [{"id": f"je-{i:04d}", **row} for i, row in enumerate(rows, start=1)]


def main() -> None:
    rows = generate(random.Random(SEED))
    OUT_PATH.parent.mkdir(parents=True, exist_ok=True)
    with OUT_PATH.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    by_kind = Counter(row["kind"] for row in rows)
    by_difficulty = Counter(row["difficulty"] for row in rows)
    print(f"wrote {len(rows)} rows to {OUT_PATH}")
    print(f"per kind: {dict(by_kind)}; per difficulty: {dict(sorted(by_difficulty.items()))}")


if __name__ == "__main__":
    main()
