"""``environment.yaml``: its schema (:mod:`.models`), the loader that reports every problem with its line
(:mod:`.loader`, over :mod:`.lines`), and the package templates ``verihub init`` copies (:mod:`.scaffold`).

The vocabulary every other part speaks; it imports only :mod:`verihub.checks` (exploit families and the
check registry), :mod:`verihub.errors` and itself: nothing that runs environments, serves, evaluates,
publishes or trains.
"""

from verihub import _lazy

__getattr__ = _lazy.moved_names(globals(), "verihub.spec.models")  # verihub.spec was the module of the models
