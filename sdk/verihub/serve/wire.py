"""The wire format of ``verihub serve``: OpenEnv's bodies and what its frames carry, with verihub's bounds (the
frames themselves, for both ends: :mod:`verihub.serve.frames`)."""

from __future__ import annotations

import json
from typing import Annotated, Any, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, with_config

from verihub.environment.session import StepResult
from verihub.serve.frames import reply_frame

__all__ = [
    "MAX_BODY",
    "MAX_GRADES",
    "MAX_LISTED",
    "GradeItem",
    "GradeRequest",
    "RangeBody",
    "ResetParams",
    "SplitBody",
    "StepBody",
    "TaskBody",
    "grade_items",
    "observation_frame",
    "step_body",
]

MAX_BODY = 16 << 20  # bytes in one HTTP body (POST /grade carries many completions)
MAX_GRADES = 1024  # items in one POST /grade
MAX_LISTED = 10_000  # tasks in one listing; past it, page with /{env}/task_range


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResetParams(_Strict):
    """Which task an episode is on: by ``task_id``, by ``index`` in ``split``, or drawn with ``seed``."""

    env: str | None = Field(None, max_length=200, description="Environment name; needed when serving several.")
    split: str | None = Field(None, max_length=200, description="Split (default: train, else the first).")
    task_id: str | None = Field(None, max_length=1000, description="The task's id column.")
    index: int | None = Field(None, ge=0, description="Row in the split.")
    seed: int | None = Field(None, ge=0, description="Draws a row of the split: the same seed, the same task.")
    episode_id: str | None = Field(None, max_length=255, description="Your name for the episode (state() shows it).")


class SplitBody(_Strict):  # the task API's bodies (OpenEnv's ListTasksRequest and kin)
    split: str | None = Field(None, max_length=200)


class TaskBody(SplitBody):
    index: int = Field(ge=0)


class RangeBody(SplitBody):
    start: int | None = None
    stop: int | None = None


class StepBody(_Strict):
    """OpenEnv's stateless step, for a single-turn task named by id: its grade, as a one-step session's."""

    action: dict[str, Any]
    env: str | None = Field(None, max_length=200)
    task_id: str = Field(max_length=1000)
    split: str | None = Field(None, max_length=200)
    timeout_s: float | None = None  # OpenEnv's; the environment's own limits apply
    request_id: str | None = Field(None, max_length=255)


# POST /grade's body as TypedDicts: pydantic checks them as strictly as the models above, but builds no
# model per item (that cost a twentieth of a cheap grade).
@with_config(ConfigDict(extra="forbid"))
class GradeItem(TypedDict):
    env: NotRequired[Annotated[str | None, Field(max_length=200)]]
    task_id: Annotated[str, Field(max_length=1000)]
    split: NotRequired[Annotated[str | None, Field(max_length=200)]]
    completion: str


@with_config(ConfigDict(extra="forbid"))
class GradeRequest(TypedDict):
    items: Annotated[list[GradeItem], Field(max_length=MAX_GRADES)]


_GRADE_REQUEST = TypeAdapter(GradeRequest)


def grade_items(body: bytes) -> list[GradeItem]:
    """A ``POST /grade`` body's items; pydantic's ValidationError naming the bad field if it is none."""
    return _GRADE_REQUEST.validate_json(body)["items"]


# ``content`` is the one required field, so a client that sends a plain reply as the schema's single required
# field (verifiers' ``openenv`` taskset does) plays every environment, tool environments included; ``tool_calls``
# stays optional. The server still takes an action without ``content``, or with ``null``, as empty text
# (environment/session.py), as clients written against the earlier schema, where nothing was required, send it;
# a JSON value in its place is the reply's text (action_of).
# The docstring is the schema's description, which such clients show the model: it speaks to the model.
class ActionSchema(BaseModel):
    """A turn: the model's text and, in tool environments, its tool calls (OpenAI form)."""

    content: str = Field(
        description="Your text. A turn without tool calls is your final answer; with tool calls, it may be empty."
    )
    tool_calls: list[dict[str, Any]] = Field(
        default_factory=list, description="Optional, in environments with tools: [{id, function: {name, arguments}}]."
    )


class ObservationSchema(BaseModel):
    messages: list[dict[str, Any]] = Field(description="New chat messages: the prompt at reset, tool output after.")
    tools: list[dict[str, Any]] | None = Field(None, description="At reset: the tools' JSON schemas.")
    env: str | None = None
    task_id: str | None = None


def action_of(data: Any) -> Any:
    """An OpenEnv step's action as a session takes it. A client that parses the model's reply as JSON to make
    the action (verifiers' ``openenv`` taskset does) sends a reply of ``42`` or ``true`` as a non-text
    ``content``, and a reply that is a JSON object (json-extract's answer) as the action itself: either is
    the model's text, written back as JSON, not an invalid action nor an empty answer."""
    if not isinstance(data, dict):
        return data
    content = data.get("content")
    if isinstance(content, int | float):  # bool too; a list stays refused: it may be OpenAI content parts
        return {**data, "content": json.dumps(content)}
    answer = {key: value for key, value in data.items() if key != "metadata"}
    if answer and "content" not in answer and "tool_calls" not in answer:
        return {"content": json.dumps(answer)}
    return data


def step_body(result: StepResult) -> dict[str, Any]:
    """OpenEnv's step response: observation, reward (None for a fault or before the end), done, metadata."""
    observation, reward, done, info = result
    return {"observation": observation, "reward": reward, "done": done, "metadata": info}


def observation_frame(result: StepResult) -> str:
    return reply_frame("observation", step_body(result))
