"""The far side of :mod:`verihub.adapters.nemo_gym`: run by the interpreter that has NVIDIA's NeMo-Gym
(``nemo-gym`` 0.7, its own environment on Python >= 3.13.14). It holds one resources server, built as NeMo-Gym
builds it (its FastAPI app, with NeMo-Gym's own middlewares and failsafes) and called in process through
Starlette's test client: no port is opened, so nothing on the machine can reach the server but this bridge.

Its requests (the loop and its errors: ``_serve.py``):

- ``{"op": "load", "server": NAME, "config": {...}}`` builds ``resources_servers.NAME.app``'s resources server
  with ``config`` (its config class's fields, such as ``grading_rule``): ``{"server": CLASS, "versions": {...}}``.
- ``{"op": "verify", "row": ROW, "completion": TEXT}`` seeds a session with the row (``/seed_session``) and
  verifies the completion as the model's one reply, a Responses API output message (``/verify``), in a session
  of its own (cookies cleared before each): ``{"reward": R, "metrics": {NAME: NUMBER}}``. An answer other than
  200, or a reply without a numeric ``reward``, is an error with what the server said.
- An episode with the row's tools, in a session (cookies) of its own: ``{"op": "begin", "row": ROW}`` seeds it
  (``{"episode": ID}``); ``{"op": "call", "episode": ID, "name": TOOL, "arguments": {...}}`` posts the arguments
  to the tool's route (``{"output": TEXT}``: the route's answer, or, when the server refuses the arguments
  with a 4xx, what it said, for the model); ``{"op": "finish", "episode": ID, "output": [ITEMS]}`` verifies the
  episode's Responses output items (messages, function calls and their outputs) as ``verify`` does and drops it;
  ``{"op": "close", "episode": ID}`` drops it.
"""

from __future__ import annotations

import importlib
import inspect
import math
import secrets
from typing import Any

_SERVER: dict[str, Any] = {}  # the test client of the one server this bridge holds
_EPISODES: dict[str, dict[str, Any]] = {}  # by a random id: the row, its tools' names and the session's cookies
_SHOWN = 500  # characters of a server's answer in an error


def _load(request: dict[str, Any]) -> dict[str, Any]:
    from importlib.metadata import version

    from fastapi.testclient import TestClient
    from nemo_gym.base_resources_server import SimpleResourcesServer
    from nemo_gym.config_types import BaseServerConfig
    from nemo_gym.server_utils import ServerClient
    from omegaconf import OmegaConf

    name = str(request["server"])
    module = importlib.import_module(f"resources_servers.{name}.app")
    found: list[Any] = [
        value
        for value in vars(module).values()
        if inspect.isclass(value)
        and issubclass(value, SimpleResourcesServer)
        and value.__module__ == module.__name__
        and not inspect.isabstract(value)
    ]
    if len(found) != 1:
        raise LookupError(f"resources_servers.{name}.app defines {len(found)} resources servers, not one")
    server_class = found[0]
    config_class = server_class.model_fields["config"].annotation
    config = config_class(name=name, host="127.0.0.1", port=0, entrypoint="app.py", **(request.get("config") or {}))
    server = server_class(
        config=config,
        server_client=ServerClient(  # a head server nothing here calls: the bridge asks the resources server only
            head_server_config=BaseServerConfig(host="127.0.0.1", port=0),
            global_config_dict=OmegaConf.create({}),
        ),
    )
    app = server.setup_webserver()
    server.setup_exception_middleware(app)
    client = TestClient(app, base_url="http://nemo-gym.invalid", raise_server_exceptions=False)
    client.__enter__()  # the app's lifespan: its startup runs now, once
    _SERVER["client"] = client
    return {"server": server_class.__name__, "versions": {"nemo-gym": version("nemo-gym")}}


def _verify(request: dict[str, Any]) -> dict[str, Any]:
    client, row = _seeded(request)
    return _verified(client, row, [_message(str(request["completion"]))])


def _begin(request: dict[str, Any]) -> dict[str, Any]:
    client, row = _seeded(request)
    episode = secrets.token_hex(8)
    tools = {tool.get("name") for tool in (row.get("responses_create_params") or {}).get("tools") or []}
    _EPISODES[episode] = {"row": row, "tools": tools, "cookies": _kept(client)}
    return {"episode": episode}


def _call(request: dict[str, Any]) -> dict[str, Any]:
    client, episode = _client(), _episode(request)
    name = str(request["name"])
    if name not in episode["tools"]:  # never a route the row does not offer (/verify, /seed_session, ...)
        return {"output": f"error: no tool named {name!r}; tools: {', '.join(sorted(episode['tools']))}"}
    _restore(client, episode["cookies"])
    response = client.post(f"/{name}", json=request.get("arguments") or {})
    episode["cookies"] = _kept(client)
    if 400 <= response.status_code < 500:  # the server refuses the arguments: the model's to hear
        return {
            "output": f"error: {name} refused the arguments (HTTP {response.status_code}): {response.text[:_SHOWN]}"
        }
    if response.status_code != 200:
        raise RuntimeError(f"/{name} answered HTTP {response.status_code}: {response.text[:_SHOWN]}")
    return {"output": response.text}


def _finish(request: dict[str, Any]) -> dict[str, Any]:
    client, episode = _client(), _episode(request)
    del _EPISODES[str(request["episode"])]
    _restore(client, episode["cookies"])
    return _verified(client, episode["row"], list(request["output"]))


def _close(request: dict[str, Any]) -> dict[str, Any]:
    _EPISODES.pop(str(request["episode"]), None)
    return {}


def _seeded(request: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The client in a new server session (cookies cleared: nothing of another answer's) seeded with the row."""
    client, row = _client(), dict(request["row"])
    client.cookies.clear()
    _answer(client.post("/seed_session", json=row), "/seed_session")
    return client, row


def _kept(client: Any) -> list[tuple[str, str, str, str]]:
    """The client's cookies (name, value, domain, path): an episode's server session, to put back later."""
    return [(cookie.name, cookie.value or "", cookie.domain, cookie.path) for cookie in client.cookies.jar]


def _restore(client: Any, kept: list[tuple[str, str, str, str]]) -> None:
    """The client's cookies made ``kept`` alone, so that one episode's session never reaches another's requests."""
    client.cookies.clear()
    for name, value, domain, path in kept:
        client.cookies.set(name, value, domain=domain, path=path)


def _client() -> Any:
    client = _SERVER.get("client")
    if client is None:
        raise LookupError("no resources server is loaded (the bridge restarted since)")
    return client


def _episode(request: dict[str, Any]) -> dict[str, Any]:
    episode = _EPISODES.get(str(request["episode"]))
    if episode is None:
        raise LookupError(f"no episode {request['episode']} (the bridge restarted since it began, or it ended)")
    return episode


def _verified(client: Any, row: dict[str, Any], output: list[dict[str, Any]]) -> dict[str, Any]:
    """``/verify`` of ``output`` (Responses output items) as the model's response to ``row``."""
    verified = _answer(client.post("/verify", json={**row, "response": _response(row, output)}), "/verify")
    reward = verified.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
        raise ValueError(f"/verify answered no numeric reward: reward={reward!r}")
    metrics = {
        key: float(value)
        for key, value in verified.items()
        if key not in ("reward", "responses_create_params", "response")
        and isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    }
    return {"reward": float(reward), "metrics": metrics}


def _answer(response: Any, route: str) -> dict[str, Any]:
    if response.status_code != 200:
        raise RuntimeError(f"{route} answered HTTP {response.status_code}: {response.text[:_SHOWN]}")
    try:
        body = response.json()
    except ValueError:
        raise ValueError(f"{route} answered no JSON: {response.text[:_SHOWN]!r}") from None
    if not isinstance(body, dict):
        raise ValueError(f"{route} answered {type(body).__name__}, not an object")
    return body


def _message(text: str) -> dict[str, Any]:
    """An assistant output message of one text part."""
    return {
        "id": f"msg_{secrets.token_hex(8)}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _response(row: dict[str, Any], output: list[dict[str, Any]]) -> dict[str, Any]:
    """A Responses API response of ``output`` (items; a text item given as a bare message is completed)."""
    params = row.get("responses_create_params") or {}
    return {
        "id": f"resp_{secrets.token_hex(8)}",
        "created_at": 0,
        "model": str(params.get("model") or "verihub"),
        "object": "response",
        "output": [_message(item["text"]) if item.get("type") == "text" else item for item in output],
        "parallel_tool_calls": params.get("parallel_tool_calls", True),
        "tool_choice": params.get("tool_choice", "auto"),
        "tools": params.get("tools") or [],
        "status": "completed",
    }


if __name__ == "__main__":
    from _serve import serve

    serve({"load": _load, "verify": _verify, "begin": _begin, "call": _call, "finish": _finish, "close": _close})
