"""Grading on other machines: a pool of ``verihub serve`` processes behind the verifier's own calls.

    pool = GraderPool(["http://grader-a:8000", "http://grader-b:8000"], token="...")
    grader = pool.grader(env, split="eval")
    grades = await grader.agrade_many(tasks, completions)     # POST /grade, in batches
    session = grader.session(task)                            # as env.session(task); tools run on a server

A :class:`RemoteGrader` offers what the in-process path offers (``agrade``/``grade``, ``agrade_many``,
``session``), so the eval loop and the trainer take either. Single-turn grades go out as batched
``POST /grade`` requests (calls made within a few milliseconds of each other share one); a multi-turn
session holds one ``WS /ws`` session on one server (:mod:`verihub.serve._remote_session`).

Each request goes to the server with the fewest requests and sessions in flight. A server that refuses
the connection, times out (``timeout_s`` per request), answers 5xx or answers nonsense is left out for a
while (a backoff that doubles, up to 30 s) and the work is sent to another; after ``attempts`` tries the
work is ``env_error`` with every server's reason, never 0. Before its first use for an environment, a
server's ``/metadata`` must show the same environment, version and content digest as the one loaded
here: a server grading other content is never used for it (its reason is in the grades).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from verihub import settings
from verihub._sync import LoopThread
from verihub.errors import GraderError, describe_error
from verihub.grading.grade import Grade, GradeStatus, grade_from_detail
from verihub.serve.wire import MAX_BODY

if TYPE_CHECKING:
    import httpx2

    from verihub.environment.core import Completion, Environment
    from verihub.environment.session import Session

__all__ = ["GraderError", "GraderPool", "RemoteGrader", "grade_from_detail"]

Task = Mapping[str, Any]
T = TypeVar("T")

BATCH = 64  # pairs in one POST /grade (the server grades them in chunks of this size too)
# What a pair may take of a POST /grade body at most: its answer JSON-escaped at worst (12 bytes a character)
# plus its ids. A batch stops short of the server's MAX_BODY by this count, so no answer the environment
# admits (max_answer_chars) can make the server refuse the batch it shares with others.
_ESCAPED, _ITEM_BYTES = 12, 1024
BATCH_WAIT_S = 0.005  # how long a lone grade waits for others to share its request
MAX_BACKOFF_S = 30.0


class Unavailable(Exception):
    """Work that no server did within its attempts; the message has every server's reason."""


class Retry(Exception):
    """This server failed this request (down, slow, 5xx, nonsense): try another."""


class Rejected(Exception):
    """The server refused this request as malformed (a 4xx): asking another would not help."""


class Refuses(Exception):
    """This server will not do this environment's work (other content, a wrong token): never ask it again."""


@dataclass(eq=False)  # servers are compared by identity (one URL may be given twice)
class _Server:
    url: str
    busy: int = 0  # requests and sessions in flight
    done: int = 0  # requests it answered
    down_until: float = 0.0  # monotonic: not chosen before, unless every server is down
    backoff_s: float = 0.0
    checked: dict[Environment, str | None] = field(default_factory=dict)  # None: ready; else why it refuses

    def failed(self) -> None:
        self.backoff_s = min(MAX_BACKOFF_S, max(1.0, self.backoff_s * 2))
        self.down_until = time.monotonic() + self.backoff_s

    def worked(self) -> None:
        self.backoff_s, self.down_until = 0.0, 0.0
        self.done += 1


class GraderPool:
    """``verihub serve`` processes that grade for this process. Usable from any thread and any event loop:
    its connections live on one I/O loop of its own. Close it (or use it as a context manager)."""

    def __init__(
        self, urls: Sequence[str], *, token: str | None = None, timeout_s: float = 120.0, attempts: int = 3
    ) -> None:
        if not urls:
            raise GraderError("a grader pool needs at least one server URL")
        self.servers = [_Server(_checked_url(url)) for url in urls]
        self.token, self.timeout_s, self.attempts = settings.grader_token(token), timeout_s, max(1, attempts)
        self._turn = itertools.count()  # breaks ties between equally busy servers, round robin
        self._io = LoopThread("verihub-graders")  # the pool's I/O loop: its client and sessions live there
        self._client: httpx2.AsyncClient | None = None
        self._started = threading.Lock()
        self._closed = False
        self._graders: dict[tuple[Environment, str | None], RemoteGrader] = {}

    def __repr__(self) -> str:  # never shows the token
        return f"GraderPool({[server.url for server in self.servers]})"

    def grader(self, env: Environment, split: str | None = None) -> RemoteGrader | None:
        """``env``'s grading on this pool; ``split`` names where its tasks are (default: any split). One per
        environment and split, so that all their grades share batches. None for an environment whose
        rewards come from its own remote (an OpenEnv server): it grades where it is loaded, not here."""
        if env.graded_remotely:
            return None
        grader = self._graders.get((env, split))
        if grader is None:
            grader = self._graders[(env, split)] = RemoteGrader(self, env, split)
        return grader

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    # -- the I/O loop ---------------------------------------------------------------------------------

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the pool's loop and wait for it (from code that is not on that loop; see
        :mod:`verihub._sync`)."""
        return self.submit(coroutine).result()

    async def arun(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Await ``coroutine`` run on the pool's loop, from any other event loop."""
        self._open()
        if self._io.on_it():
            return await coroutine
        return await asyncio.wrap_future(self.submit(coroutine))

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        """Start ``coroutine`` on the pool's loop; its future."""
        self._open()
        return self._io.submit(coroutine)

    def _open(self) -> None:
        with self._started:
            if self._closed:
                raise RuntimeError("the grader pool is closed")

    def close(self) -> None:
        with self._started:
            was_open, self._closed = not self._closed, True
        loop = self._io.loop
        if not was_open or loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=15)
        self._io.stop(join_s=10)

    async def _shutdown(self) -> None:
        """Let the work in flight (close frames of ended sessions) finish, a moment at most; then the client."""
        pending = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        if pending:
            _, late = await asyncio.wait(pending, timeout=2)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> GraderPool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- choosing a server, with retries (on the I/O loop) ----------------------------------------------

    def pick(self, env: Environment, tried: Sequence[_Server], prefer: _Server | None = None) -> _Server | None:
        """The least busy server that may grade ``env``: untried ones first, those up before those down
        (``prefer``, where it is untried: the one that holds a session)."""
        usable = [server for server in self.servers if server.checked.get(env) is None]
        if prefer is not None and prefer in usable and prefer not in tried:
            return prefer
        fresh = [server for server in usable if server not in tried] or usable
        if not fresh:
            return None
        now, turn = time.monotonic(), next(self._turn)
        order = {id(server): (index - turn) % len(self.servers) for index, server in enumerate(self.servers)}
        return min(fresh, key=lambda server: (server.down_until > now, server.busy, order[id(server)]))

    async def on_a_server(self, env: Environment, work: Any, prefer: _Server | None = None) -> Any:
        """``await work(server)`` on one server after another until one does it; :class:`Unavailable`
        with each attempt's reason after ``attempts`` (``Retry``: that server failed; ``Refuses``: it
        will not grade ``env``)."""
        tried: list[_Server] = []
        reasons: list[str] = []
        while len(tried) < self.attempts:
            server = self.pick(env, tried, prefer)
            if server is None:
                break
            if server in tried:  # every server already failed this once: wait out its backoff (a restart)
                await asyncio.sleep(min(max(server.down_until - time.monotonic(), 0.25), 5.0))
            tried.append(server)
            server.busy += 1
            try:
                await self._ready(server, env)
                result = await work(server)
            except Retry as error:
                server.failed()
                reasons.append(f"{server.url}: {error}")
                continue
            except Refuses as error:
                server.checked[env] = str(error)
                reasons.append(f"{server.url}: {error}")
                continue
            finally:
                server.busy -= 1
            server.worked()
            return result
        refused = [
            f"{server.url}: {why}"
            for server in self.servers
            if (why := server.checked.get(env)) is not None and f"{server.url}: {why}" not in reasons
        ]
        shown = "; ".join([*reasons, *refused]) or "no server"
        raise Unavailable(f"no grader could grade it: {shown}"[:500])  # the part before ':' is its kind

    async def request(self, server: _Server, method: str, path: str, **options: Any) -> Any:
        """One HTTP request to ``server``, its JSON body; failures as :class:`Retry` or :class:`Refuses`."""
        import httpx2

        if self._client is None:
            self._client = httpx2.AsyncClient(
                timeout=self.timeout_s,
                headers=self.headers,
                limits=httpx2.Limits(max_connections=256, max_keepalive_connections=64),
            )
        try:
            response = await self._client.request(method, server.url + path, **options)
        except httpx2.TimeoutException:
            raise Retry(f"no answer in {self.timeout_s:g}s") from None
        except httpx2.HTTPError as error:
            raise Retry(f"{describe_error(error)}"[:300] or type(error).__name__) from None
        if response.status_code in (401, 403):
            raise Refuses("it wants another token (--grader-token, VERIHUB_GRADER_TOKEN)")
        if response.status_code in (408, 429) or response.status_code >= 500:
            raise Retry(f"HTTP {response.status_code}")
        try:
            body = response.json()
        except ValueError:
            raise Retry(f"HTTP {response.status_code} with a body that is not JSON") from None
        if response.status_code != 200:
            message = body.get("message") if isinstance(body, dict) else None
            raise Rejected(f"HTTP {response.status_code}: {str(message or body)[:300]}")
        return body

    async def _ready(self, server: _Server, env: Environment) -> None:
        """Check once that ``server`` grades the very environment loaded here."""
        if env in server.checked:
            return
        try:
            metadata = await self.request(server, "GET", "/metadata")
        except Rejected as error:
            raise Refuses(f"it is no verihub serve ({error})") from None
        served = (
            {entry.get("name"): entry for entry in metadata.get("environments", []) if isinstance(entry, dict)}
            if isinstance(metadata, dict)
            else {}
        )
        entry = served.get(env.id)
        if entry is None:
            raise Refuses(f"it does not serve {env.id} (it serves {', '.join(map(str, served)) or 'nothing'})")
        if entry.get("version") != env.version:
            raise Refuses(f"it serves {env.id}@{entry.get('version')}, not {env.version}")
        from verihub.environment.digest import environment_digest

        if entry.get("digest") != environment_digest(env):
            raise Refuses(f"its {env.id}@{env.version} has other content (tasks, checks or files) than this one")
        server.checked[env] = None


class RemoteGrader:
    """One environment's grading on a :class:`GraderPool`: the calls of ``env`` and ``env.verifier``."""

    def __init__(self, pool: GraderPool, env: Environment, split: str | None = None) -> None:
        self.pool, self.env, self.split = pool, env, split
        self.weights = {layer.spec.name: layer.spec.weight for layer in env.verifier.layers}
        from verihub.environment.digest import environment_digest

        environment_digest(env)  # computed here, once, not on the pool's loop when a server is first checked
        self._waiting: list[tuple[Task, str, asyncio.Future[Grade]]] = []
        self._bytes = 0  # what the waiting pairs may take of a request body, at most
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"RemoteGrader({self.env.id!r}, {self.pool!r})"

    @property
    def multi_turn(self) -> bool:
        return self.env.spec.interaction.kind == "multi_turn"

    async def agrade(self, task: Task, completion: Completion) -> Grade:
        """One single-turn grade; it shares a POST /grade with the grades asked for around the same time."""
        from verihub.environment.core import completion_text

        return await self.pool.arun(self._queued(task, completion_text(completion)))

    def grade(self, task: Task, completion: Completion) -> Grade:
        from verihub.environment.core import completion_text

        return self.pool.run(self._queued(task, completion_text(completion)))

    async def agrade_many(self, tasks: Iterable[Task], completions: Iterable[str]) -> list[Grade]:
        pairs = list(zip(tasks, completions, strict=True))
        return await self.pool.arun(self._many(pairs))

    def grade_many(self, tasks: Iterable[Task], completions: Iterable[str]) -> list[Grade]:
        return self.pool.run(self._many(list(zip(tasks, completions, strict=True))))

    def session(self, task: Task, *, sandbox: Any = None) -> Session | Any:
        """An episode on ``task``, as ``env.session(task)``: single-turn, graded through this pool; multi-turn,
        a WebSocket session on one of its servers (tools run there, in its sandbox)."""
        if sandbox is not None:
            raise GraderError("a remote session runs its tools in the server's sandbox; pass no sandbox")
        if self.multi_turn:
            from verihub.serve._remote_session import RemoteSession

            return RemoteSession(self, task)
        from verihub.environment.session import Session

        return Session(self.env, task, grader=self)

    # -- on the I/O loop --------------------------------------------------------------------------------

    async def _queued(self, task: Task, completion: str) -> Grade:
        if len(completion) > self.env.spec.max_answer_chars:
            return self.env.verifier.too_long(len(completion))  # wrong without a request, as the server would grade it
        future: asyncio.Future[Grade] = asyncio.get_running_loop().create_future()
        if self._waiting and self._bytes + _size(completion) > MAX_BODY:
            self._flush()
        self._waiting.append((task, completion, future))
        self._bytes += _size(completion)
        if len(self._waiting) >= BATCH:
            self._flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(BATCH_WAIT_S, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiting, self._waiting, self._bytes = self._waiting, [], 0
        if waiting:
            sending = asyncio.get_running_loop().create_task(self._send(waiting))
            self._sending.add(sending)
            sending.add_done_callback(self._sending.discard)

    async def _send(self, waiting: list[tuple[Task, str, asyncio.Future[Grade]]]) -> None:
        try:
            grades = await self._batch([(task, completion) for task, completion, _ in waiting])
        except BaseException as error:  # noqa: BLE001 - cancelled or a bug: the callers hear it
            for *_, future in waiting:
                if not future.done():
                    future.set_exception(error)
            return
        for (*_, future), grade in zip(waiting, grades, strict=True):
            if not future.done():
                future.set_result(grade)

    async def _many(self, pairs: list[tuple[Task, str]]) -> list[Grade]:
        limit, verifier = self.env.spec.max_answer_chars, self.env.verifier
        grades: list[Grade | None] = [verifier.too_long(len(text)) if len(text) > limit else None for _, text in pairs]
        sent = [index for index, grade in enumerate(grades) if grade is None]
        batches: list[list[int]] = []
        size = 0
        for index in sent:
            if not batches or len(batches[-1]) >= BATCH or size + _size(pairs[index][1]) > MAX_BODY:
                batches.append([])
                size = 0
            batches[-1].append(index)
            size += _size(pairs[index][1])
        graded = await asyncio.gather(*(self._batch([pairs[index] for index in batch]) for batch in batches))
        for batch, answers in zip(batches, graded, strict=True):
            for index, grade in zip(batch, answers, strict=True):
                grades[index] = grade
        return grades  # type: ignore[return-value]  # every slot is filled by the loop above

    async def _batch(self, pairs: list[tuple[Task, str]]) -> list[Grade]:
        """One POST /grade on some server; every pair ``env_error`` if none does it."""
        items = [
            {"env": self.env.id, "task_id": str(task["id"]), "split": self.split, "completion": completion}
            for task, completion in pairs
        ]

        async def post(server: _Server) -> list[Grade]:
            body = await self.pool.request(server, "POST", "/grade", json={"items": items})
            details = body.get("grades") if isinstance(body, dict) else None
            if not isinstance(details, list) or len(details) != len(items):
                raise Retry(
                    f"an answer of {len(details) if isinstance(details, list) else 'no'} grades for {len(items)} asked"
                )
            try:
                return [grade_from_detail(detail, self.weights) for detail in details]
            except (KeyError, TypeError, ValueError) as error:
                raise Retry(f"a malformed grade ({describe_error(error, 200)})") from None

        try:
            return await self.pool.on_a_server(self.env, post)
        except Unavailable as error:
            return [Grade(GradeStatus.ENV_ERROR, None, (), str(error))] * len(pairs)
        except Rejected as error:  # e.g. a task that is not in the environment's dataset
            return [Grade(GradeStatus.ENV_ERROR, None, (), f"the grader refused the request: {error}"[:500])] * len(
                pairs
            )


def _size(completion: str) -> int:
    return _ESCAPED * len(completion) + _ITEM_BYTES


def _checked_url(url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise GraderError(f"grader URL {url!r}: use http://HOST:PORT (a `verihub serve` address)")
    return url.strip().rstrip("/")
