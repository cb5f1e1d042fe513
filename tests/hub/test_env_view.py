"""An environment page's task preview: templates filled as text, a task's own chat messages (``prompt.messages``)
shown as they are, never formatted, and bounded however hostile the data."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

from verihub.hub.env_view import MAX_MESSAGES, MAX_TASKS, MAX_TEXT, EnvView, environment_view
from verihub.ids import RepoId

REPO = RepoId("alice", "chat-math")
_commits = itertools.count()


@dataclass(frozen=True)
class Entry:
    path: str
    size: int


class Storage:
    """The three reads a view makes, over files in memory (a release's files at one commit)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.blobs = files

    def files(self, repo: RepoId, sha: str) -> list[Entry]:
        return [Entry(path, len(data)) for path, data in self.blobs.items()]

    def read(self, repo: RepoId, name: str, sha: str) -> bytes:
        return self.blobs[name]

    def read_prefix(self, repo: RepoId, name: str, sha: str, limit: int) -> bytes:
        return self.blobs[name][:limit]


def view(prompt: str, rows: list[dict[str, Any]]) -> EnvView:
    spec = f"id: chat-math\ndataset: {{source: data/tasks.jsonl}}\nprompt: {prompt}\n"
    data = "".join(json.dumps(row) + "\n" for row in rows)
    storage = Storage({"environment.yaml": spec.encode(), "data/tasks.jsonl": data.encode()})
    return environment_view(storage, REPO, f"{next(_commits):040x}")  # type: ignore[arg-type]  # a fake


QUESTION = {"role": "user", "content": "What is {answer} + {0}?"}


def test_own_messages_are_shown_unformatted_after_the_system_template() -> None:
    rows = [
        {"id": "t1", "prompt": [QUESTION], "answer": "2", "topic": "sums"},
        {"id": "t2", "prompt": json.dumps([{"role": "system", "content": "Be terse."}, QUESTION]), "answer": "4"},
    ]
    shown = view('{messages: prompt, system: "About {topic}."}', rows)
    assert [task.messages for task in shown.tasks] == [
        (("system", "About sums."), ("user", "What is {answer} + {0}?")),
        (("system", "Be terse."), ("user", "What is {answer} + {0}?")),  # its own system message, not the template
    ]


def test_template_mode_is_filled_as_before() -> None:
    shown = view('{system: "About {topic}.", user: "What is {question}?"}', [{"question": "1 + 1", "topic": "sums"}])
    assert shown.tasks[0].messages == (("system", "About sums."), ("user", "What is 1 + 1?"))


def test_hostile_messages_stay_bounded() -> None:
    count = MAX_MESSAGES + 2  # three such rows fit in the bytes a preview reads
    many = [{"role": "user", "content": f"turn {i} " + "x" * MAX_TEXT} for i in range(count)]
    shown = view("{messages: prompt}", [{"id": str(i), "prompt": many} for i in range(MAX_TASKS + 2)])
    assert len(shown.tasks) == MAX_TASKS
    messages = shown.tasks[0].messages
    assert len(messages) == MAX_MESSAGES + 1 and messages[1] == ("…", "2 more messages")
    assert messages[0][1].startswith("turn 0 ") and messages[-1][1].startswith(f"turn {count - 1} ")
    assert all(len(text) <= MAX_TEXT for _, text in messages)


def test_malformed_messages_are_shown_not_refused() -> None:
    rows = [
        {"id": "a", "prompt": "not json"},
        {"id": "b", "prompt": {"role": "user", "content": "q"}},
        {"id": "c", "prompt": [["user", "q"], {"role": {"nested": 1}, "content": 5}]},
    ]
    shown = view("{messages: prompt}", rows)
    assert [task.messages for task in shown.tasks] == [
        (("messages", "(not chat messages)"),),
        (("messages", "(not chat messages)"),),
        (("?", "(not a plain value)"), ("(not a plain value)", "5")),
    ]
