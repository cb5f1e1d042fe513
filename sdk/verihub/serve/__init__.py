"""``verihub serve`` and its clients: environments as an OpenEnv-compatible service.

The server (:mod:`.server`) and its parts: who may call it (:mod:`.gate`), the wire format with its
bounds (:mod:`.wire`), the HTTP routes and ``POST /grade`` (:mod:`.http`), ``WS /ws`` sessions
(:mod:`.ws`), what a process holds (:mod:`.state`) and its socket (:mod:`.listen`). The client side:
:class:`~verihub.serve.graders.GraderPool`, grading and sessions on a pool of servers (:mod:`.graders`).

Importing this package loads nothing: the server needs ``verihub[hub]`` (FastAPI, uvicorn), the client
does not. Imports the environment and everything under it; never the eval, the hub or the trainers.
"""

from verihub import _lazy

__getattr__ = _lazy.moved_names(globals(), "verihub.serve.server")  # verihub.serve was the server's module
