"""The hub's web pages: a searchable list of repositories (filtered by tag, as the Hub's
``/datasets?other=rl-environment``), one page per environment or verifier package (how to use it with verihub,
leaderboard, verifier layers, a preview of tasks, version history, card, files) and one per other dataset (eval
results with their runs; another framework's RL environment with how verihub loads it).

Everything a package or a results file says is escaped (cards render from Markdown with raw HTML off), and
every page carries a Content-Security-Policy that lets run only the page's own inline script and style
(by hash) and loads nothing from anywhere: should something slip past the escaping, a browser would still
run none of it.
"""

from __future__ import annotations

import base64
import datetime
import functools
import hashlib
import html
import json
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from packaging.version import InvalidVersion, Version

from verihub.hub.env_view import EnvView
from verihub.hub.leaderboard import LeaderboardRow
from verihub.hub.roles import RL_ENVIRONMENT_TAG

__all__ = ["CSP", "DatasetPage", "PackagePage", "dataset_page", "listing_page", "package_page"]

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1040px;margin:2rem auto;padding:0 1rem;color:#1b1f24}
a{color:#0b5cad;text-decoration:none} header{display:flex;justify-content:space-between;align-items:center}
input[type=search]{padding:.4rem .6rem;width:18rem} table{border-collapse:collapse;width:100%;margin:.5rem 0}
td,th{border-bottom:1px solid #ddd;padding:.35rem .5rem;text-align:left;vertical-align:top}
code,pre{background:#f4f5f7;padding:.1rem .3rem} pre{white-space:pre-wrap;word-break:break-word;margin:.2rem 0}
.kind{font-size:.8rem;background:#eef;border-radius:4px;padding:.05rem .35rem}
.owner{background:#e3f5e1} .community{background:#f6eedd} .card{margin-top:1.5rem}
.note{color:#57606a;font-size:.85rem} td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
table.sortable th{cursor:pointer;user-select:none;white-space:nowrap}
th[aria-sort=ascending]::after{content:" \\25B2"} th[aria-sort=descending]::after{content:" \\25BC"}
.role{font-size:.75rem;color:#57606a;text-transform:uppercase} details{margin:.4rem 0}
.rl{background:#e6f0ff;color:#0b3d91}
"""

# Sorts a table.sortable by the clicked column: cells' data-sort (else their text), numbers as numbers.
_SORT_SCRIPT = """
for (const table of document.querySelectorAll("table.sortable")) {
  const heads = [...table.tHead.rows[0].cells];
  heads.forEach((head, column) => {
    head.tabIndex = 0;
    const sort = () => {
      const ascending = head.getAttribute("aria-sort") !== "ascending";
      heads.forEach(other => other.removeAttribute("aria-sort"));
      head.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const key = row => row.cells[column].dataset.sort ?? row.cells[column].textContent;
      const numeric = head.dataset.type === "number";
      const rows = [...table.tBodies[0].rows].sort((a, b) => {
        const order = numeric ? Number(key(a)) - Number(key(b)) : key(a).localeCompare(key(b));
        return ascending ? order : -order;
      });
      table.tBodies[0].append(...rows);
    };
    head.addEventListener("click", sort);
    head.addEventListener("keydown", event => { if (event.key === "Enter") sort(); });
  });
}
"""


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


CSP = (
    f"default-src 'none'; style-src {_hash(_STYLE)}; script-src {_hash(_SORT_SCRIPT)}; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
_MARKDOWN = MarkdownIt("commonmark", {"html": False})  # raw HTML in cards is escaped
MAX_CARD_CHARS = 256 << 10  # rendered of a card: markdown costs 1-4 s a MiB, and anyone may ask for a page


def _page(title: str, body: str) -> str:
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"
        f"<style>{_STYLE}</style></head><body><header><h1><a href='/'>verihub hub</a></h1>"
        "<form action='/' method='get'><input type='search' name='q' placeholder='Search environments'>"
        f"</form></header>{body}<script>{_SORT_SCRIPT}</script></body></html>"
    )


RL_BADGE = "<span class='kind rl'>RL environment</span>"


def listing_page(query: str, repos: list[dict[str, Any]], tags: list[str] | None = None) -> str:
    rows = "".join(
        f"<tr><td><a href='/datasets/{_e(r['id'])}'>{_e(r['id'])}</a></td>"
        f"<td><span class='kind'>{_e(r['kind'])}</span>{' ' + RL_BADGE if r.get('rl_environment') else ''}</td>"
        f"<td>{_e(r['summary'])}</td><td class='num'>{int(r['downloads'])}</td></tr>"
        for r in repos
    )
    heading = f"Results for “{_e(query)}”" if query else "Environments, verifiers and datasets"
    if tags:
        heading += " tagged " + ", ".join(f"<code>{_e(tag)}</code>" for tag in tags)
    body = (
        f"<h2>{heading}</h2><p class='note'><a href='/?other=rl-environment'>RL environments only</a></p>"
        "<table><tr><th>Repository</th><th>Kind</th><th>Summary</th><th class='num'>Downloads</th>"
        f"</tr>{rows or '<tr><td colspan=4>Nothing found.</td></tr>'}</table>"
    )
    return _page("verihub hub", body)


@dataclass(frozen=True)
class PackagePage:
    """What an environment's (or verifier package's) page shows."""

    repo: str
    kind: str
    private: bool
    install: str
    versions: list[tuple[str, int]]  # (version, release time), oldest first
    files: list[str]
    card: str
    view: EnvView | None = None
    leaderboard: list[LeaderboardRow] = field(default_factory=list)
    shipped_eval: str | None = None  # eval/metadata.json committed into the package by its author
    hub: str = ""  # the hub's URL, for the commands it shows


def package_page(page: PackagePage) -> str:
    owner = page.repo.split("/")[0]
    latest = page.versions[-1][0] if page.versions else None
    badge = f" {RL_BADGE}" if page.kind == "env" else ""
    sections = [
        f"<h2>{_e(page.repo)} <span "
        f"class='kind'>{_e(page.kind)}</span>{badge}{' <span class=kind>private</span>' if page.private else ''}</h2>",
        f"<p><strong>Install:</strong> <code id='install'>{_e(page.install)}</code></p>",
        _usage(page.repo, page.hub, page.kind),
        "<p><strong>Versions:</strong> "
        f"{', '.join(_e(v) for v, _ in reversed(page.versions)) or 'none published yet'}</p>",
    ]
    if page.view is not None and page.view.description:
        sections.append(f"<p>{_e(page.view.description)}</p>")
    if page.kind == "env":
        sections.append(_leaderboard(page.leaderboard, owner))
    sections.append(_shipped_eval(page.shipped_eval))
    if page.view is not None:
        sections.append(_layers(page.view, latest))
        sections.append(_tasks(page.view))
    sections.append(_history(page.versions))
    sections.append(f"<div class='card'>{_card_html(page.card)}</div>")
    sections.append(f"<h3>Files</h3><ul>{''.join(f'<li><code>{_e(f)}</code></li>' for f in page.files)}</ul>")
    return _page(page.repo, "".join(sections))


@dataclass(frozen=True)
class DatasetPage:
    """What the page of a dataset that is no package shows: eval results, or another framework's data."""

    repo: str
    private: bool
    environment: str | None  # the environment its card links
    runs: list[LeaderboardRow]
    skipped: int  # runs that are not shown: metadata that does not parse, or of another environment
    files: list[str]
    card: str
    results: bool = True  # eval results (runs/): else another dataset
    tags: list[str] = field(default_factory=list)
    hub: str = ""  # the hub's URL, for the commands it shows


def dataset_page(page: DatasetPage) -> str:
    private = " <span class=kind>private</span>" if page.private else ""
    badge = f" {RL_BADGE}" if RL_ENVIRONMENT_TAG in page.tags else ""
    head = f"<h2>{_e(page.repo)} <span class='kind'>dataset</span>{badge}{private}</h2>"
    tags = "".join(f"<span class='kind'>{_e(tag)}</span> " for tag in page.tags[:30])
    if not page.results:
        usage = _usage(page.repo, page.hub, "dataset") if RL_ENVIRONMENT_TAG in page.tags else ""
        body = (
            f"{head}<p>{tags}</p>{usage}<div class='card'>{_card_html(page.card)}</div>"
            f"<h3>Files</h3><ul>{''.join(f'<li><code>{_e(f)}</code></li>' for f in page.files)}</ul>"
        )
        return _page(page.repo, body)
    link = (
        (
            f"<p>Eval results for <a href='/datasets/{_e(page.environment)}'>{_e(page.environment)}</a>, pushed by "
            f"<strong>{_e(page.repo.split('/')[0])}</strong>.</p>"
        )
        if page.environment
        else "<p class='note'>This dataset's card links no environment (verihub: {environment: OWNER/NAME}).</p>"
    )
    skipped = (
        f"<p class='note'>{page.skipped} run(s) not shown: their metadata.json is not an eval's.</p>"
        if page.skipped
        else ""
    )
    body = (
        f"{head}{link}"
        f"<h3>Runs</h3>{_runs_table(page.runs, None)}{skipped}"
        f"<div class='card'>{_card_html(page.card)}</div>"
        f"<h3>Files</h3><ul>{''.join(f'<li><code>{_e(f)}</code></li>' for f in page.files)}</ul>"
    )
    return _page(page.repo, body)


def _usage(repo: str, hub: str, kind: str) -> str:
    """How to use the repository with verihub: the commands, for this hub."""
    option = f" --hub {hub}" if hub else ""
    variable = f"VERIHUB_HUB={hub} " if hub else ""
    if kind == "verifier":
        lines = [f"verihub install {repo}{option}", "verihub checks    # its checks, for your environment's layers"]
    else:
        lines = [
            f"verihub eval hf://datasets/{repo}{option} --model MODEL",
            f"verihub validate hf://datasets/{repo}{option}",
            f"{variable}python -c 'import verihub; print(verihub.load_env(\"hf://datasets/{repo}\"))'",
        ]
        if kind == "env":
            lines.append(f'verihub install {repo}{option}    # then load_env("{repo}") by name')
    return "<h3>Use it with verihub</h3><pre>" + _e("\n".join(lines)) + "</pre>"


# -- sections --------------------------------------------------------------------------------------------


def _leaderboard(rows: list[LeaderboardRow], owner: str) -> str:
    if not rows:
        return (
            "<h3 id='leaderboard'>Leaderboard</h3><p class='note'>No eval results yet: "
            "<code>verihub eval ENV --model ... --push</code> adds a row.</p>"
        )
    return (
        "<h3 id='leaderboard'>Leaderboard</h3>"
        + _runs_table(rows, owner)
        + "<p class='note'>Click a column to sort. Verifier version: the environment version whose verifier "
        "graded the run; a run regraded under another version (<code>verihub regrade</code>) also names the "
        "version its answers were made under. "
        "Faults: rollouts that faulted (an environment error or a "
        f"timeout, counted as failed in pass@1) of those asked, and tasks with no rollout graded. "
        f"<em>owner</em> rows were pushed by {_e(owner)}; every other row names who pushed it.</p>"
    )


def _runs_table(rows: list[LeaderboardRow], owner: str | None) -> str:
    head = (
        "<thead><tr><th>Model</th><th data-type='number' title='The version whose verifier graded the run'>"
        "Verifier version</th><th data-type='number' class='num'>pass@1</th>"
        "<th data-type='number' class='num'>pass@k</th><th data-type='number' class='num'>Faults</th>"
        "<th data-type='number'>Pushed</th><th>Pushed by</th></tr></thead>"
    )
    body = []
    for row in rows:
        pass_k = (
            (f"{row.passk:.3f} <span class='note'>k={row.k}</span>", f"{row.passk:.6f}")
            if row.passk is not None
            else ("–", "-1")
        )
        faults = row.faulted / row.rollouts if row.rollouts else 0.0
        answered = f" <span class='note'>regraded; answers made under {_e(row.answered)}</span>" if row.answered else ""
        who = _e(row.pusher)
        if owner is not None:
            badge = "owner" if row.pusher == owner else "community"
            who += f" <span class='kind {badge}'>{badge}</span>"
        body.append(
            f"<tr><td title='{_e(row.sampling)}'>{_e(row.model)}</td>"
            f"<td data-sort='{_version_key(row.version)}'>{_e(row.version)}{answered}</td>"
            f"<td class='num' data-sort='{row.pass1:.6f}'>{row.pass1:.3f}</td>"
            f"<td class='num' data-sort='{pass_k[1]}'>{pass_k[0]}</td>"
            f"<td class='num' data-sort='{faults:.6f}'>{row.faulted}/{row.rollouts} rollouts, "
            f"{row.tasks_lost}/{row.tasks} tasks lost</td>"
            f"<td data-sort='{int(row.pushed)}'>{_date(row.pushed)}</td>"
            f"<td><a href='/datasets/{_e(str(row.dataset))}'>{who}</a></td></tr>"
        )
    return f"<table class='sortable runs'>{head}<tbody>{''.join(body)}</tbody></table>"


def _shipped_eval(metadata: str | None) -> str:
    if not metadata:
        return ""
    try:
        metrics = json.loads(metadata).get("metrics", {})
        cells = "".join(
            f"<tr><td>{_e(str(k))}</td><td class='num'>{_e(_fmt(v))}</td></tr>"
            for k, v in metrics.items()
            if not isinstance(v, dict | list)
        )
    except (json.JSONDecodeError, AttributeError, RecursionError):
        return ""
    return f"<h3>Eval results shipped with the package</h3><table>{cells}</table>"


def _layers(view: EnvView, version: str | None) -> str:
    if not view.layers:
        return ""
    rows = "".join(
        f"<tr><td><code>{_e(layer.name)}</code></td><td><span class='kind'>{_e(layer.kind)}</span></td>"
        f"<td><code>{_e(layer.checks)}</code></td><td>{'gate' if layer.gate else ''}</td>"
        f"<td class='num'>{_e(layer.weight)}</td></tr>"
        for layer in view.layers
    )
    where = f" (version {_e(version)})" if version else ""
    return (
        f"<h3>Verifier{where}</h3><table class='layers'><thead><tr><th>Layer</th><th>Kind</th><th>Checks</th>"
        f"<th>Gate</th><th class='num'>Weight</th></tr></thead><tbody>{rows}</tbody></table>"
        "<p class='note'>Layers run in this order; a gate that fails stops the layers after it. The reward is "
        "the weighted sum of the layers' scores.</p>"
    )


def _tasks(view: EnvView) -> str:
    notes = "".join(f"<p class='note'>{_e(note)}</p>" for note in view.notes)
    if not view.tasks:
        return f"<h3>Tasks</h3>{notes}" if notes else ""
    items = []
    for task in view.tasks:
        messages = "".join(
            f"<div><span class='role'>{_e(role)}</span><pre>{_e(text)}</pre></div>" for role, text in task.messages
        )
        items.append(
            f"<details open class='task'><summary>task <code>{_e(task.task_id)}</code></summary>{messages}</details>"
        )
    source = f" from <code>{_e(view.source)}</code>" if view.source else ""
    return (
        f"<h3>Tasks</h3><p class='note'>The first {len(view.tasks)}{source}, as the model sees them.</p>"
        + "".join(items)
        + notes
    )


def _history(versions: list[tuple[str, int]]) -> str:
    if not versions:
        return ""
    rows = "".join(
        f"<tr><td><code>{_e(version)}</code></td><td>{_date(stamp)}</td></tr>" for version, stamp in reversed(versions)
    )
    return f"<h3>Version history</h3><table class='history'><tr><th>Version</th><th>Released</th></tr>{rows}</table>"


# -- small helpers ---------------------------------------------------------------------------------------


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)


@functools.lru_cache(maxsize=32)  # a page is asked for again and again; its card changes with a commit
def _card_html(card: str) -> str:
    body = card.split("---", 2)[2] if card.startswith("---") and card.count("---") >= 2 else card
    if len(body) <= MAX_CARD_CHARS:
        return _MARKDOWN.render(body)
    return (
        _MARKDOWN.render(body[:MAX_CARD_CHARS])
        + f"<p class='note'>The card goes on for {len(body) - MAX_CARD_CHARS:,} "
        "more characters; the README holds all of it.</p>"
    )


def _date(stamp: float) -> str:
    if not stamp:
        return "–"
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _version_key(version: str) -> str:
    """A number that orders versions (1.10 after 1.9) for the table's sort."""
    try:
        release = (list(Version(version).release) + [0, 0, 0])[:3]
    except InvalidVersion:
        return "0"
    return str(sum(min(part, 99_999) * 100_000 ** (2 - index) for index, part in enumerate(release)))  # < 2**53


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)
