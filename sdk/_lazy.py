"""Public names that load their module on first use (PEP 562), so importing a package stays cheap."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_names(
    namespace: dict[str, Any], where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package whose ``globals()`` is ``namespace``, for
    ``where`` (public name -> the submodule holding it).

    Any other name raises AttributeError, which is what lets ``from package import submodule`` fall
    through to importing the submodule.
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{where[name]}"), name)
        namespace[name] = value  # later lookups find it without calling this
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
