"""An environment and its episodes: :class:`~verihub.environment.core.Environment` and ``load_env``
(:mod:`.core`), its tasks (:mod:`.dataset`, read as plain rows by ``_tasktable``), the installed
environment packages (:mod:`.installed`), what its grades depend on (:mod:`.digest`), and sessions, one
episode each (:mod:`.session`, with typed tools as JSON schemas in :mod:`.toolschema`); refs that name a hub
package, ``owner/name@spec``, installed through the hub client's entry point before loading (:mod:`.hub_refs`).

Imports the spec, checks, sandbox, generation and grading; ``load_env`` hands a ``SCHEME:`` ref to the loader
an installed package registers for it (``verihub.adapters`` entry points: :mod:`.installed`), never importing an
adapter by name. Never what serves, evaluates, publishes or trains.
"""

from verihub import _lazy

__getattr__ = _lazy.moved_names(globals(), "verihub.environment.core")  # verihub.environment was one module
