"""The hub's web pages: a searchable list of packages and one page per package (card, versions, files,
install command, latest eval results when a package ships ``eval/metadata.json``)."""

from __future__ import annotations

import html
import json
from typing import Any

from markdown_it import MarkdownIt

__all__ = ["listing_page", "package_page"]

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:960px;margin:2rem auto;padding:0 1rem;color:#1b1f24}
a{color:#0b5cad;text-decoration:none} header{display:flex;justify-content:space-between;align-items:center}
input[type=search]{padding:.4rem .6rem;width:18rem} table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:.35rem .5rem;text-align:left} code,pre{background:#f4f5f7;padding:.1rem .3rem}
.kind{font-size:.8rem;background:#eef;border-radius:4px;padding:.05rem .35rem} .card{margin-top:1.5rem}
"""


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><header><h1><a href='/'>verihub hub</a></h1>"
            "<form action='/' method='get'><input type='search' name='q' placeholder='Search environments'>"
            f"</form></header>{body}</body></html>")


def listing_page(query: str, repos: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td><a href='/{html.escape(r['id'])}'>{html.escape(r['id'])}</a></td>"
        f"<td><span class='kind'>{html.escape(r['kind'])}</span></td><td>{html.escape(r['summary'])}</td>"
        f"<td>{r['downloads']}</td></tr>" for r in repos)
    heading = f"Results for “{html.escape(query)}”" if query else "Environments and verifiers"
    body = (f"<h2>{heading}</h2><table><tr><th>Repository</th><th>Kind</th><th>Summary</th><th>Downloads</th></tr>"
            f"{rows or '<tr><td colspan=4>Nothing found.</td></tr>'}</table>")
    return _page("verihub hub", body)


def package_page(info: dict[str, Any], versions: list[str], files: list[str], card: str, install: str,
                 eval_metadata: str | None) -> str:
    body_text = card.split("---", 2)[2] if card.startswith("---") and card.count("---") >= 2 else card
    rendered = MarkdownIt("commonmark", {"html": False}).render(body_text)  # raw HTML in cards is escaped
    versions_html = ", ".join(html.escape(v) for v in reversed(versions)) or "none published yet"
    files_html = "".join(f"<li><code>{html.escape(f)}</code></li>" for f in files)
    results = ""
    if eval_metadata:
        try:
            metrics = json.loads(eval_metadata).get("metrics", {})
            cells = "".join(f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(_fmt(v))}</td></tr>"
                            for k, v in metrics.items() if not isinstance(v, dict))
            results = f"<h3>Latest eval results</h3><table>{cells}</table>"
        except (json.JSONDecodeError, AttributeError):
            results = ""
    body = (f"<h2>{html.escape(info['id'])} <span class='kind'>{html.escape(str(info.get('kind', 'env')))}</span></h2>"
            f"<p><strong>Install:</strong> <code id='install'>{html.escape(install)}</code></p>"
            f"<p><strong>Versions:</strong> {versions_html}</p>{results}"
            f"<div class='card'>{rendered}</div><h3>Files</h3><ul>{files_html}</ul>")
    return _page(info["id"], body)


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)
