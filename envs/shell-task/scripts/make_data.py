"""Generate envs/shell-task/data/tasks.jsonl: shell tasks graded on the final state of the work dir.

Every task is written out here by hand: the ``instructions`` the model sees, the initial ``files`` of its
work dir (path -> text, stored as JSON text), a reference ``solution`` (bash commands), a ``partial``
command sequence that leaves the state unfinished or wrong, and a ``checker``: a Python script that runs
in the sandbox with the final work dir as its current directory and exits 0 only when every assertion
about the files holds. The checker starts with the helpers in ``PRELUDE``.

Regenerate (deterministic, overwrites the file) with: ``python envs/shell-task/scripts/make_data.py``
Check that the file is up to date without writing: ``python envs/shell-task/scripts/make_data.py --check``
That the solutions pass and the partial commands fail is checked in the sandbox by ``verihub validate``.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections import Counter
from pathlib import Path

OUT_PATH = Path(__file__).resolve().parent.parent / "data" / "tasks.jsonl"

PRELUDE = """\
import csv, io, json, os, stat, subprocess, sys, tarfile


def read(path):
    assert os.path.isfile(path) and not os.path.islink(path), "%s is missing or not a regular file" % path
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def lines(path):
    return read(path).splitlines()


def equal(got, want, what):
    assert got == want, "%s: got %r, want %r" % (what, got, want)


def absent(path):
    assert not os.path.lexists(path), "%s should not exist" % path


def mode(path):
    assert os.path.lexists(path), "%s is missing" % path
    return stat.S_IMODE(os.lstat(path).st_mode)


def all_files(top="."):
    found = set()
    for root, _, names in os.walk(top):
        for name in names:
            found.add(os.path.relpath(os.path.join(root, name), top))
    return found


def run(argv, stdin=None):
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=5)
"""

TASKS: list[dict] = []


def task(
    difficulty: int,
    category: str,
    instructions: str,
    *,
    files: dict[str, str] | None = None,
    solution: str,
    partial: str,
    checker: str,
) -> None:
    """Register one task; text arguments are dedented and stripped."""
    files = {name: textwrap.dedent(text).lstrip("\n") for name, text in (files or {}).items()}
    listing = (
        "The working directory holds: " + ", ".join(f"`{name}`" for name in sorted(files)) + "."
        if files
        else "The working directory is empty."
    )
    TASKS.append(
        {
            "id": f"sh-{len(TASKS) + 1:03d}",
            "difficulty": difficulty,
            "category": category,
            "instructions": " ".join(textwrap.dedent(instructions).split()),
            "listing": listing,
            "files": json.dumps(files, sort_keys=True),
            "solution": textwrap.dedent(solution).strip(),
            "partial": textwrap.dedent(partial).strip(),
            "checker": PRELUDE + "\n\n" + textwrap.dedent(checker).strip() + "\n",
        }
    )


# -- difficulty 1: create, copy, move, delete, simple edits ---------------------------------------------

task(
    1,
    "create",
    "Create a file `hello.txt` containing exactly one line: `Hello, world!`",
    solution="echo 'Hello, world!' > hello.txt",
    partial="touch hello.txt",
    checker="equal(lines('hello.txt'), ['Hello, world!'], 'hello.txt')",
)

task(
    1,
    "create",
    """Create the directories `project/src`, `project/tests` and `project/docs`, and an empty
     file `project/README.md`.""",
    solution="mkdir -p project/src project/tests project/docs && touch project/README.md",
    partial="mkdir -p project/src project/tests",
    checker="""
     for directory in ('project/src', 'project/tests', 'project/docs'):
         assert os.path.isdir(directory), '%s is not a directory' % directory
     equal(read('project/README.md'), '', 'project/README.md')
     """,
)

task(
    1,
    "create",
    """Create `config/app.env` with exactly these three lines, in this order: `HOST=localhost`,
     `PORT=8080`, `DEBUG=false`.""",
    solution="mkdir -p config && printf 'HOST=localhost\\nPORT=8080\\nDEBUG=false\\n' > config/app.env",
    partial="mkdir -p config && printf 'HOST=localhost\\nPORT=8080\\n' > config/app.env",
    checker="equal(lines('config/app.env'), ['HOST=localhost', 'PORT=8080', 'DEBUG=false'], 'config/app.env')",
)

task(
    1,
    "count",
    "Write the number of lines in `data.txt` to `count.txt` (just the number).",
    files={"data.txt": "".join(f"reading {i}: {(i * 37) % 101}\n" for i in range(1, 18))},
    solution="wc -l < data.txt > count.txt",
    partial="wc -l data.txt > count.txt",
    checker="equal(read('count.txt').strip(), '17', 'count.txt')",
)

task(
    1,
    "copy",
    "Copy `notes.txt` to `backup/notes.txt`; keep the original where it is.",
    files={
        "notes.txt": """
         Meeting notes, 3 March
         - ship the release on Friday
         - ask Dana about the invoices
         """
    },
    solution="mkdir -p backup && cp notes.txt backup/notes.txt",
    partial="mkdir -p backup",
    checker="""
     original = read('notes.txt')
     assert original.startswith('Meeting notes, 3 March'), 'notes.txt was changed'
     equal(read('backup/notes.txt'), original, 'backup/notes.txt')
     """,
)

task(
    1,
    "move",
    "Rename `draft.md` to `final.md`.",
    files={"draft.md": "# Quarterly report\n\nRevenue grew 4% on the previous quarter.\n"},
    solution="mv draft.md final.md",
    partial="cp draft.md final.md",
    checker="""
     absent('draft.md')
     equal(read('final.md'), '# Quarterly report\\n\\nRevenue grew 4% on the previous quarter.\\n', 'final.md')
     """,
)

task(
    1,
    "delete",
    """Delete every file whose name ends in `.tmp`, in the working directory and in all of its
     subdirectories. Keep every other file.""",
    files={
        "a.txt": "keep me\n",
        "b.tmp": "scratch\n",
        "cache/c.tmp": "scratch\n",
        "cache/keep.txt": "keep me too\n",
        "cache/deep/d.tmp": "scratch\n",
        "e.tmp.bak": "a backup, not a .tmp file\n",
    },
    solution="find . -type f -name '*.tmp' -delete",
    partial="rm -f *.tmp",
    checker="""
     for path in ('b.tmp', 'cache/c.tmp', 'cache/deep/d.tmp'):
         absent(path)
     equal(read('a.txt'), 'keep me\\n', 'a.txt')
     equal(read('cache/keep.txt'), 'keep me too\\n', 'cache/keep.txt')
     equal(read('e.tmp.bak'), 'a backup, not a .tmp file\\n', 'e.tmp.bak')
     """,
)

task(
    1,
    "permissions",
    "Make `run.sh` executable by its owner. Do not change its content.",
    files={"run.sh": "#!/bin/sh\necho started\n"},
    solution="chmod u+x run.sh",
    partial="chmod u+w run.sh",
    checker="""
     equal(read('run.sh'), '#!/bin/sh\\necho started\\n', 'run.sh')
     assert mode('run.sh') & stat.S_IXUSR, 'run.sh is not executable by its owner (mode %o)' % mode('run.sh')
     """,
)

task(
    1,
    "edit",
    "Append the line `127.0.0.1 api.local` to the end of `hosts.txt`, keeping its existing lines.",
    files={"hosts.txt": "127.0.0.1 localhost\n10.0.0.5 db.internal\n"},
    solution="echo '127.0.0.1 api.local' >> hosts.txt",
    partial="echo '127.0.0.1 api.local' > hosts.txt",
    checker="""
     equal(lines('hosts.txt'), ['127.0.0.1 localhost', '10.0.0.5 db.internal', '127.0.0.1 api.local'], 'hosts.txt')
     """,
)

task(
    1,
    "transform",
    "Write the content of `words.txt` converted to upper case to `upper.txt`.",
    files={"words.txt": "alpha beta\ngamma\ndelta epsilon zeta\n"},
    solution="tr '[:lower:]' '[:upper:]' < words.txt > upper.txt",
    partial="cp words.txt upper.txt",
    checker="equal(lines('upper.txt'), ['ALPHA BETA', 'GAMMA', 'DELTA EPSILON ZETA'], 'upper.txt')",
)

task(
    1,
    "combine",
    "Concatenate `part1.txt`, `part2.txt` and `part3.txt`, in that order, into `whole.txt`.",
    files={
        "part1.txt": "It was a bright cold day in April,\n",
        "part2.txt": "and the clocks were striking\n",
        "part3.txt": "thirteen.\n",
    },
    solution="cat part1.txt part2.txt part3.txt > whole.txt",
    partial="cat part1.txt part3.txt part2.txt > whole.txt",
    checker="""
     equal(lines('whole.txt'), ['It was a bright cold day in April,', 'and the clocks were striking', 'thirteen.'],
           'whole.txt')
     """,
)

# -- difficulty 2: filter, sort, extract, fix, rename by pattern, archive -------------------------------

task(
    2,
    "sort",
    """Write the names in `names.txt`, sorted alphabetically and with duplicates removed, to
     `unique_names.txt`, one per line.""",
    files={"names.txt": "Mallory\nAlice\nTrent\nBob\nAlice\nEve\nBob\nCarol\nTrent\nAlice\n"},
    solution="sort -u names.txt > unique_names.txt",
    partial="sort names.txt > unique_names.txt",
    checker="equal(lines('unique_names.txt'), ['Alice', 'Bob', 'Carol', 'Eve', 'Mallory', 'Trent'], 'unique_names.txt')",
)

_APP_LOG = """
    2024-05-01 12:00:01 INFO service started
    2024-05-01 12:00:07 ERROR disk /dev/sdb is full
    2024-05-01 12:01:13 WARN retrying upload 3
    2024-05-01 12:02:44 INFO upload 3 done
    2024-05-01 12:03:02 ERROR cannot reach db.internal:5432
    2024-05-01 12:03:05 DEBUG pool size 4
    2024-05-01 12:04:59 ERROR request 991 timed out
    2024-05-01 12:05:00 INFO shutting down
    """
task(
    2,
    "filter",
    """Write every line of `app.log` whose level is `ERROR` to `errors.log`, in their original
     order.""",
    files={"app.log": _APP_LOG},
    solution="grep ' ERROR ' app.log > errors.log",
    partial="grep -c ' ERROR ' app.log > errors.log",
    checker="""
     want = [line for line in lines('app.log') if ' ERROR ' in line]
     equal(len(want), 3, 'app.log errors (app.log was changed)')
     equal(lines('errors.log'), want, 'errors.log')
     """,
)

task(
    2,
    "extract",
    """`people.csv` has the columns `name,age,city`. Write the distinct cities (without the
     header), sorted alphabetically, one per line, to `cities.txt`.""",
    files={
        "people.csv": """
         name,age,city
         Ana,34,Lisbon
         Ben,28,Berlin
         Chloe,41,Lisbon
         Dev,25,Austin
         Emma,39,Berlin
         Femi,31,Lagos
         """
    },
    solution="tail -n +2 people.csv | cut -d, -f3 | sort -u > cities.txt",
    partial="cut -d, -f3 people.csv > cities.txt",
    checker="equal(lines('cities.txt'), ['Austin', 'Berlin', 'Lagos', 'Lisbon'], 'cities.txt')",
)

task(
    2,
    "fix-config",
    """`settings.ini` has two mistakes: the port must be `8080` (it says `80800`) and debug
     must be off (`debug = no`). Fix them and leave every other line exactly as it is.""",
    files={
        "settings.ini": """
         [server]
         host = 0.0.0.0
         port = 80800
         debug = yes

         [database]
         name = shop
         pool = 5
         """
    },
    solution="sed -i -e 's/^port = 80800$/port = 8080/' -e 's/^debug = yes$/debug = no/' settings.ini",
    partial="sed -i 's/^port = 80800$/port = 8080/' settings.ini",
    checker="""
     equal(lines('settings.ini'), ['[server]', 'host = 0.0.0.0', 'port = 8080', 'debug = no', '', '[database]',
                                   'name = shop', 'pool = 5'], 'settings.ini')
     """,
)

task(
    2,
    "fix-script",
    """`greet.sh` is broken. `bash greet.sh Alice` must print `Hello, Alice!`, and `bash
     greet.sh` without an argument must print `Hello, world!`. Fix the script.""",
    files={
        "greet.sh": """
         #!/bin/bash
         name="$1"
         if [ -z "$name" ]
             name="world"
         fi
         echo "Hello, $name!"
         """
    },
    solution="""
     cat > greet.sh <<'EOF'
     #!/bin/bash
     name="$1"
     if [ -z "$name" ]; then
         name="world"
     fi
     echo "Hello, $name!"
     EOF
     """,
    partial="chmod +x greet.sh",
    checker="""
     read('greet.sh')
     for args, want in ((['Zed'], 'Hello, Zed!'), (['Alice'], 'Hello, Alice!'), ([], 'Hello, world!')):
         done = run(['bash', 'greet.sh', *args])
         equal((done.returncode, done.stdout.strip()), (0, want), 'bash greet.sh %s' % ' '.join(args))
     """,
)

task(
    2,
    "rename",
    """Rename every `img_NNN.jpeg` file to `photo-NNN.jpg` (for example `img_001.jpeg` becomes
     `photo-001.jpg`). No `img_*.jpeg` file may remain; leave other files alone.""",
    files={
        "img_001.jpeg": "jpeg bytes one\n",
        "img_002.jpeg": "jpeg bytes two\n",
        "img_010.jpeg": "jpeg bytes ten\n",
        "notes.txt": "photos from the trip\n",
    },
    solution='for f in img_*.jpeg; do n=${f#img_}; mv "$f" "photo-${n%.jpeg}.jpg"; done',
    partial='for f in img_*.jpeg; do n=${f#img_}; cp "$f" "photo-${n%.jpeg}.jpg"; done',
    checker="""
     equal(sorted(path for path in all_files() if path.endswith('.jpeg') or path.endswith('.jpg')),
           ['photo-001.jpg', 'photo-002.jpg', 'photo-010.jpg'], 'image files')
     equal(read('notes.txt'), 'photos from the trip\\n', 'notes.txt')
     for number, word in (('001', 'one'), ('002', 'two'), ('010', 'ten')):
         equal(read('photo-%s.jpg' % number), 'jpeg bytes %s\\n' % word, 'photo-%s.jpg' % number)
     """,
)

task(
    2,
    "aggregate",
    """`sales.csv` has the columns `region,amount`. Write the sum of the `amount` column to
     `total.txt` (just the number).""",
    files={"sales.csv": "region,amount\nnorth,1250\nsouth,830\neast,2045\nwest,977\nnorth,310\n"},
    solution="tail -n +2 sales.csv | cut -d, -f2 | paste -sd+ | bc > total.txt",
    partial="tail -n +2 sales.csv | cut -d, -f2 | head -n 1 > total.txt",
    checker="""
     text = read('total.txt').strip()
     try:
         value = float(text)
     except ValueError:
         raise AssertionError('total.txt holds %r, not a number' % text)
     equal(value, 5412.0, 'total.txt')
     """,
)

_APP_PY = """
    from util.helpers import fetch_data


    def main():
        rows = fetch_data("orders")
        print(len(rows))
    """
_HELPERS_PY = """
    def fetch_data(table):
        return [table] * 3
    """
task(
    2,
    "replace",
    """Rename the function `fetch_data` to `load_records` everywhere it appears in the `.py`
     files under `src/` (its definition, imports and calls). Do not change any other file.""",
    files={
        "src/app.py": _APP_PY,
        "src/util/helpers.py": _HELPERS_PY,
        "src/README.md": "Call fetch_data(table) to read a table.\n",
        "notes.txt": "TODO: rename fetch_data\n",
    },
    solution="find src -name '*.py' -exec sed -i 's/fetch_data/load_records/g' {} +",
    partial="sed -i 's/fetch_data/load_records/g' src/app.py",
    checker="""
     equal(read('src/app.py'), 'from util.helpers import load_records\\n\\n\\ndef main():\\n'
           '    rows = load_records("orders")\\n    print(len(rows))\\n', 'src/app.py')
     equal(read('src/util/helpers.py'), 'def load_records(table):\\n    return [table] * 3\\n', 'src/util/helpers.py')
     equal(read('src/README.md'), 'Call fetch_data(table) to read a table.\\n', 'src/README.md')
     equal(read('notes.txt'), 'TODO: rename fetch_data\\n', 'notes.txt')
     """,
)

task(
    2,
    "archive",
    """Create a gzip-compressed tar archive `logs.tar.gz` that holds the `.log` files of `logs/`,
     stored as `logs/NAME.log`, and no other files.""",
    files={"logs/api.log": "api up\napi down\n", "logs/worker.log": "job 1 ok\n", "logs/notes.txt": "not a log\n"},
    solution="tar -czf logs.tar.gz logs/*.log",
    partial="tar -czf logs.tar.gz logs",
    checker="""
     assert os.path.isfile('logs.tar.gz'), 'logs.tar.gz is missing'
     try:
         archive = tarfile.open('logs.tar.gz', 'r:gz')
     except (tarfile.TarError, OSError) as error:
         raise AssertionError('logs.tar.gz is not a gzip-compressed tar archive: %s' % error)
     with archive:
         found = {}
         for member in archive.getmembers():
             if not member.isdir():
                 assert member.isfile(), '%s is not a regular file' % member.name
                 found[os.path.normpath(member.name)] = archive.extractfile(member).read().decode()
     equal(found, {'logs/api.log': 'api up\\napi down\\n', 'logs/worker.log': 'job 1 ok\\n'}, 'archive members')
     """,
)

task(
    2,
    "permissions",
    """Give every `.sh` file in `scripts/` the mode `755` and `secrets.txt` the mode `600`.
     Leave the modes of other files as they are.""",
    files={
        "scripts/build.sh": "#!/bin/sh\nmake\n",
        "scripts/test.sh": "#!/bin/sh\nmake test\n",
        "scripts/README": "helper scripts\n",
        "secrets.txt": "token=abc123\n",
    },
    solution="chmod 755 scripts/*.sh && chmod 600 secrets.txt",
    partial="chmod 755 scripts/*.sh",
    checker="""
     equal(oct(mode('scripts/build.sh')), oct(0o755), 'mode of scripts/build.sh')
     equal(oct(mode('scripts/test.sh')), oct(0o755), 'mode of scripts/test.sh')
     equal(oct(mode('secrets.txt')), oct(0o600), 'mode of secrets.txt')
     equal(oct(mode('scripts/README')), oct(0o644), 'mode of scripts/README')
     equal(read('secrets.txt'), 'token=abc123\\n', 'secrets.txt')
     """,
)

_TEXT = "the cat sat on the mat and the dog sat on the log\na bird and a dog met the fox\nthe fox sat and the owl sat\n"
task(
    2,
    "count",
    """Write the three most frequent words of `text.txt` (words are separated by spaces and line
     breaks) to `top3.txt`, most frequent first, one per line as `WORD COUNT` (for example `the 9`).""",
    files={"text.txt": _TEXT},
    solution="""
     tr -s ' ' '\\n' < text.txt | grep -v '^$' | sort | uniq -c | sort -rn | head -n 3 | while read -r count word; do echo "$word $count"; done > top3.txt
     """,
    partial="tr -s ' ' '\\n' < text.txt | sort | uniq -c | sort -rn | head -n 3 > top3.txt",
    checker="equal([line.split() for line in lines('top3.txt')], [['the', '7'], ['sat', '4'], ['and', '3']], 'top3.txt')",
)

task(
    2,
    "organize",
    """Move each file in `inbox/` into `sorted/EXT/`, where EXT is its extension (for example
     `inbox/a.txt` goes to `sorted/txt/a.txt`). `inbox/` must end up empty (or be removed).""",
    files={"inbox/a.txt": "text a\n", "inbox/b.csv": "x,y\n1,2\n", "inbox/c.md": "# c\n", "inbox/d.txt": "text d\n"},
    solution='for f in inbox/*; do e="${f##*.}"; mkdir -p "sorted/$e"; mv "$f" "sorted/$e/"; done',
    partial="mkdir -p sorted/txt sorted/csv sorted/md && cp inbox/*.txt sorted/txt/",
    checker="""
     equal(all_files('inbox') if os.path.isdir('inbox') else set(), set(), 'files left in inbox/')
     want = {'sorted/txt/a.txt': 'text a\\n', 'sorted/csv/b.csv': 'x,y\\n1,2\\n', 'sorted/md/c.md': '# c\\n',
             'sorted/txt/d.txt': 'text d\\n'}
     equal({path: read(path) for path in sorted(all_files()) if path.startswith('sorted/')}, want, 'sorted/')
     """,
)

# -- difficulty 3: multi-step transforms, repairs and reorganisations ------------------------------------

task(
    3,
    "csv-json",
    """Convert `users.csv` (columns `id,name,email`) to `users.json`: a JSON array with one
     object per row, in file order, with the keys `id` (a number), `name` and `email` (strings).""",
    files={
        "users.csv": 'id,name,email\n1,Ada Lovelace,ada@example.org\n2,"Hopper, Grace",grace@example.org\n'
        "3,Alan Turing,alan@example.org\n"
    },
    solution="""
     python3 - <<'EOF'
     import csv, json
     with open("users.csv", newline="") as handle:
         rows = [{"id": int(row["id"]), "name": row["name"], "email": row["email"]} for row in csv.DictReader(handle)]
     with open("users.json", "w") as handle:
         json.dump(rows, handle, indent=2)
     EOF
     """,
    partial="""python3 -c 'import csv, json; json.dump(list(csv.DictReader(open("users.csv"))), open("users.json", "w"))'""",
    checker="""
     try:
         data = json.loads(read('users.json'))
     except ValueError as error:
         raise AssertionError('users.json is not valid JSON: %s' % error)
     equal(data, [{'id': 1, 'name': 'Ada Lovelace', 'email': 'ada@example.org'},
                  {'id': 2, 'name': 'Hopper, Grace', 'email': 'grace@example.org'},
                  {'id': 3, 'name': 'Alan Turing', 'email': 'alan@example.org'}], 'users.json')
     assert all(type(row['id']) is int for row in data), 'ids must be JSON numbers'
     """,
)

_INVENTORY = (
    json.dumps(
        [
            {"sku": "C-300", "name": "cable", "qty": 12},
            {"sku": "A-100", "name": "adapter", "qty": 0},
            {"sku": "B-210", "name": "battery", "qty": 5},
            {"sku": "A-105", "name": "antenna", "qty": 3},
            {"sku": "D-001", "name": "dock", "qty": 0},
        ],
        indent=2,
    )
    + "\n"
)
task(
    3,
    "json-csv",
    """Convert `inventory.json` to `inventory.csv` with the header `sku,qty` and one row per item
     whose `qty` is greater than 0, sorted by `sku`.""",
    files={"inventory.json": _INVENTORY},
    solution="""{ echo 'sku,qty'; jq -r '.[] | select(.qty > 0) | "\\(.sku),\\(.qty)"' inventory.json | sort; } > inventory.csv""",
    partial="""{ echo 'sku,qty'; jq -r '.[] | "\\(.sku),\\(.qty)"' inventory.json | sort; } > inventory.csv""",
    checker="equal(lines('inventory.csv'), ['sku,qty', 'A-105,3', 'B-210,5', 'C-300,12'], 'inventory.csv')",
)

task(
    3,
    "join",
    """`orders.csv` has the columns `order_id,customer_id,amount` and `customers.csv` the columns
     `customer_id,name`. Write `report.csv` with the header `name,total` and one row per customer who has
     orders: the customer's name and the sum of their order amounts, largest total first.""",
    files={
        "orders.csv": "order_id,customer_id,amount\n1,c2,40\n2,c1,15\n3,c3,70\n4,c2,25\n5,c1,5\n6,c3,10\n",
        "customers.csv": "customer_id,name\nc1,Iris\nc2,Omar\nc3,Yuki\nc4,Zoe\n",
    },
    solution="""
     python3 - <<'EOF'
     import csv
     names = {row["customer_id"]: row["name"] for row in csv.DictReader(open("customers.csv"))}
     totals = {}
     for row in csv.DictReader(open("orders.csv")):
         totals[row["customer_id"]] = totals.get(row["customer_id"], 0) + int(row["amount"])
     with open("report.csv", "w") as handle:
         handle.write("name,total\\n")
         for customer, total in sorted(totals.items(), key=lambda item: -item[1]):
             handle.write(f"{names[customer]},{total}\\n")
     EOF
     """,
    partial="""
     python3 - <<'EOF'
     import csv
     totals = {}
     for row in csv.DictReader(open("orders.csv")):
         totals[row["customer_id"]] = totals.get(row["customer_id"], 0) + int(row["amount"])
     with open("report.csv", "w") as handle:
         handle.write("name,total\\n")
         for customer, total in sorted(totals.items()):
             handle.write(f"{customer},{total}\\n")
     EOF
     """,
    checker="equal(lines('report.csv'), ['name,total', 'Yuki,80', 'Omar,65', 'Iris,20'], 'report.csv')",
)

_STATS_PY = """
    import sys


    def read_numbers(path):
        with open(path) as handle:
            return [float(line) for line in handle.readlines()[1:] if line.strip()]


    def median(values):
        values = sorted(values)
        middle = len(values) // 2
        if len(values) % 2:
            return values[middle]
        return (values[middle] + values[middle + 1]) / 2


    numbers = read_numbers(sys.argv[1])
    print(f"mean={sum(numbers) / len(numbers):.2f} median={median(numbers):.2f}")
    """
task(
    3,
    "fix-script",
    """`python3 stats.py FILE` should print the mean and the median of the numbers in FILE
     (one per line; blank lines are ignored) as `mean=M median=D`, each with two decimals, but it prints wrong
     values. Fix `stats.py` so that it works for any such file.""",
    files={"stats.py": _STATS_PY, "numbers.txt": "4\n8\n15\n16\n23\n42\n"},
    solution="sed -i -e 's/handle.readlines()\\[1:\\]/handle.readlines()/' -e 's/values\\[middle + 1\\]/values[middle - 1]/' stats.py",
    partial="sed -i 's/handle.readlines()\\[1:\\]/handle.readlines()/' stats.py",
    checker="""
     read('stats.py')
     cases = {'9\\n1\\n5\\n3\\n': 'mean=4.50 median=4.00', '2\\n\\n7\\n4\\n': 'mean=4.33 median=4.00',
              '10\\n20\\n': 'mean=15.00 median=15.00', '4\\n8\\n15\\n16\\n23\\n42\\n': 'mean=18.00 median=15.50'}
     for index, (content, want) in enumerate(cases.items()):
         path = '/tmp/case%d.txt' % index
         with open(path, 'w') as handle:
             handle.write(content)
         done = run([sys.executable, '-I', 'stats.py', path])
         equal((done.returncode, done.stdout.strip()), (0, want), 'python3 stats.py on %r' % content)
     """,
)

_ACCESS_LOG = "".join(
    f'10.0.0.{n % 7} - - [10/Oct/2024:13:{n:02d}:00 +0000] "GET /{path} HTTP/1.1" {status} {100 + n * 13}\n'
    for n, (path, status) in enumerate(
        [
            ("", 200),
            ("login", 302),
            ("home", 200),
            ("api/items", 500),
            ("missing", 404),
            ("home", 200),
            ("api/items", 200),
            ("old", 301),
            ("api/items", 500),
            ("gone", 404),
            ("home", 200),
            ("login", 200),
        ]
    )
)
task(
    3,
    "aggregate",
    """`access.log` is a web server log in the common log format (the status code is the field
     after the quoted request). Write `status_counts.txt` with one line per status code, `CODE COUNT`,
     sorted by code in ascending order.""",
    files={"access.log": _ACCESS_LOG},
    solution="""mawk '{print $9}' access.log | sort | uniq -c | while read -r count code; do echo "$code $count"; done > status_counts.txt""",
    partial="cut -d' ' -f9 access.log | sort | uniq -c > status_counts.txt",
    checker="""
     equal([line.split() for line in lines('status_counts.txt')],
           [['200', '6'], ['301', '1'], ['302', '1'], ['404', '2'], ['500', '2']], 'status_counts.txt')
     """,
)

task(
    3,
    "rename",
    """Move every `report_YYYYMMDD.csv` file to `archive/YYYY/MM/report_DD.csv` (for example
     `report_20240315.csv` goes to `archive/2024/03/report_15.csv`). Keep each file's content.""",
    files={
        "report_20240315.csv": "day,sales\n15,120\n",
        "report_20240402.csv": "day,sales\n2,98\n",
        "report_20231130.csv": "day,sales\n30,143\n",
        "report_20240328.csv": "day,sales\n28,77\n",
    },
    solution="""
     for f in report_*.csv; do
         d=${f#report_}; d=${d%.csv}
         mkdir -p "archive/${d:0:4}/${d:4:2}"
         mv "$f" "archive/${d:0:4}/${d:4:2}/report_${d:6:2}.csv"
     done
     """,
    partial="mkdir -p archive && mv report_*.csv archive/",
    checker="""
     want = {'archive/2024/03/report_15.csv': 'day,sales\\n15,120\\n', 'archive/2024/04/report_02.csv': 'day,sales\\n2,98\\n',
             'archive/2023/11/report_30.csv': 'day,sales\\n30,143\\n', 'archive/2024/03/report_28.csv': 'day,sales\\n28,77\\n'}
     equal(sorted(path for path in all_files() if path.startswith('report_') or path.startswith('archive/')),
           sorted(want), 'report files')
     for path, content in want.items():
         equal(read(path), content, path)
     """,
)

task(
    3,
    "dedupe",
    """`contacts.csv` (columns `name,email`) lists some people twice, with the email written in
     different letter cases. Write `contacts_clean.csv` with the header and, for each email address compared
     case-insensitively, only its first row, in the original order.""",
    files={
        "contacts.csv": "name,email\nAda,ada@example.org\nBo,bo@example.org\nAda L.,ADA@example.org\n"
        "Cy,cy@example.org\nBo,Bo@Example.org\nDee,dee@example.org\n"
    },
    solution="mawk -F, 'NR == 1 || !seen[tolower($2)]++' contacts.csv > contacts_clean.csv",
    partial="sort -u contacts.csv > contacts_clean.csv",
    checker="""
     equal(lines('contacts_clean.csv'), ['name,email', 'Ada,ada@example.org', 'Bo,bo@example.org', 'Cy,cy@example.org',
                                         'Dee,dee@example.org'], 'contacts_clean.csv')
     """,
)

task(
    3,
    "env-json",
    """Convert `app.env` into `config.json`: one JSON object with a key per variable (skip
     comments and blank lines). Values that are integers become JSON numbers, `true` and `false` become
     booleans, and everything else stays a string.""",
    files={
        "app.env": "# service settings\nAPP_NAME=shop\nPORT=8080\n\nDEBUG=false\nWORKERS=4\n"
        "LOG_LEVEL=info\nCACHE=true\nVERSION=1.2.0\n"
    },
    solution="""
     python3 - <<'EOF'
     import json
     config = {}
     for line in open("app.env"):
         line = line.strip()
         if not line or line.startswith("#"):
             continue
         key, _, value = line.partition("=")
         if value in ("true", "false"):
             config[key] = value == "true"
         elif value.lstrip("-").isdigit():
             config[key] = int(value)
         else:
             config[key] = value
     json.dump(config, open("config.json", "w"), indent=2)
     EOF
     """,
    partial="""
     python3 - <<'EOF'
     import json
     pairs = [line.strip().split("=", 1) for line in open("app.env") if "=" in line]
     json.dump(dict(pairs), open("config.json", "w"))
     EOF
     """,
    checker="""
     try:
         data = json.loads(read('config.json'))
     except ValueError as error:
         raise AssertionError('config.json is not valid JSON: %s' % error)
     want = {'APP_NAME': 'shop', 'PORT': 8080, 'DEBUG': False, 'WORKERS': 4, 'LOG_LEVEL': 'info', 'CACHE': True,
             'VERSION': '1.2.0'}
     equal(data, want, 'config.json')
     equal({key: type(value).__name__ for key, value in data.items()},
           {key: type(value).__name__ for key, value in want.items()}, 'value types in config.json')
     """,
)

task(
    3,
    "split",
    """Split `big.csv` into `part_1.csv`, `part_2.csv`, ... of at most 3 data rows each, in order,
     each starting with the header line of `big.csv`. Keep `big.csv` and leave no other new files.""",
    files={"big.csv": "id,item\n" + "".join(f"{n},item-{n}\n" for n in range(1, 11))},
    solution="""
     tail -n +2 big.csv | split -l 3 - chunk_
     i=1
     for c in chunk_*; do { head -n 1 big.csv; cat "$c"; } > "part_$i.csv"; rm "$c"; i=$((i + 1)); done
     """,
    partial="split -l 3 big.csv part_",
    checker="""
     original = lines('big.csv')
     equal(len(original), 11, 'rows of big.csv (it was changed)')
     equal(sorted(all_files()), ['big.csv', 'part_1.csv', 'part_2.csv', 'part_3.csv', 'part_4.csv'], 'files')
     rows = []
     for number in range(1, 5):
         part = lines('part_%d.csv' % number)
         equal(part[0], 'id,item', 'header of part_%d.csv' % number)
         assert 1 <= len(part) - 1 <= 3, 'part_%d.csv has %d data rows' % (number, len(part) - 1)
         rows += part[1:]
     equal(rows, original[1:], 'the data rows of the parts, in order')
     """,
)

task(
    3,
    "fix-config",
    """`package.json` is not valid JSON (single quotes, trailing commas). Make it valid JSON
     with the same content, except that `version` must become `1.1.0`.""",
    files={
        "package.json": """
         {
           'name': 'demo-app',
           "version": "1.0.0",
           "scripts": {"test": "pytest -q", "lint": "ruff check .",},
           "private": true,
           "keywords": ['demo', "cli",],
         }
         """
    },
    solution="""
     cat > package.json <<'EOF'
     {
       "name": "demo-app",
       "version": "1.1.0",
       "scripts": {"test": "pytest -q", "lint": "ruff check ."},
       "private": true,
       "keywords": ["demo", "cli"]
     }
     EOF
     """,
    partial="""sed -i 's/"version": "1.0.0"/"version": "1.1.0"/' package.json""",
    checker="""
     try:
         data = json.loads(read('package.json'))
     except ValueError as error:
         raise AssertionError('package.json is not valid JSON: %s' % error)
     equal(data, {'name': 'demo-app', 'version': '1.1.0', 'scripts': {'test': 'pytest -q', 'lint': 'ruff check .'},
                  'private': True, 'keywords': ['demo', 'cli']}, 'package.json')
     """,
)

task(
    3,
    "dedupe",
    """`servers.txt` lists one host name per line. Write `hosts_by_domain.txt`: the distinct host
     names (compared case-insensitively, written in lower case), grouped by domain (everything after the first
     dot), domains in alphabetical order and host names alphabetical within each domain, one per line.""",
    files={
        "servers.txt": "web2.eu.example.com\nDB1.us.example.com\nweb1.eu.example.com\ncache.us.example.com\n"
        "web1.EU.example.com\nmail.example.com\ndb1.us.example.com\n"
    },
    solution="""
     tr '[:upper:]' '[:lower:]' < servers.txt | sort -u | sed 's/^\\([^.]*\\)\\.\\(.*\\)$/\\2 \\1.\\2/' | sort | cut -d' ' -f2 > hosts_by_domain.txt
     """,
    partial="tr '[:upper:]' '[:lower:]' < servers.txt | sort -u > hosts_by_domain.txt",
    checker="""
     equal(lines('hosts_by_domain.txt'), ['web1.eu.example.com', 'web2.eu.example.com', 'mail.example.com',
                                          'cache.us.example.com', 'db1.us.example.com'], 'hosts_by_domain.txt')
     """,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if data/tasks.jsonl is not up to date")
    args = parser.parse_args()
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in TASKS)
    counts = Counter(row["difficulty"] for row in TASKS)
    summary = f"{len(TASKS)} tasks, " + ", ".join(f"difficulty {d}: {counts[d]}" for d in sorted(counts))
    if args.check:
        if not OUT_PATH.is_file() or OUT_PATH.read_text() != text:
            sys.exit(f"{OUT_PATH} is out of date; run {Path(__file__).name} to regenerate it")
        print(f"{OUT_PATH} is up to date ({summary})")
        return
    OUT_PATH.write_text(text)
    print(f"wrote {OUT_PATH} ({summary})")


if __name__ == "__main__":
    main()
