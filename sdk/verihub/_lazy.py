"""Names that load their module on first use (PEP 562), so importing a package stays cheap; and the old
import paths of modules that moved, which still load, with a DeprecationWarning, for one release."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Collection, Mapping
from importlib import import_module
from importlib.machinery import ModuleSpec
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import FrameType, ModuleType


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


def moved_names(namespace: dict[str, Any], home: str, names: Collection[str] | None = None) -> Callable[[str], Any]:
    """The ``__getattr__`` of the module whose ``globals()`` is ``namespace``, whose names (``names``, or
    all it used to define: a module that became a package) now live in the module ``home``; reading one
    through the old path warns, once (the value is kept, as :func:`lazy_names` keeps its)."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        from importlib.util import find_spec

        if (
            name.startswith("__")
            or (names is not None and name not in names)
            or (names is None and find_spec(f"{package}.{name}") is not None)
        ):  # a submodule: import it
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            value = getattr(import_module(home), name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        _deprecated(f"{package}.{name}", f"{home}.{name}")
        namespace[name] = value
        return value

    return __getattr__


def moved_modules(moved: Mapping[str, str]) -> None:
    """Let each old module path in ``moved`` (old -> new) import the module at its new path, the same
    module object under both names, with a DeprecationWarning naming the new one."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules(moved))


def _deprecated(old: str, new: str) -> None:
    """Warn at the line that used the old path: past this file's frames, and the import machinery's,
    which ``warnings`` passes over by itself."""
    frame: FrameType | None = sys._getframe(1)
    climbs = 1
    while frame is not None:
        filename = frame.f_code.co_filename
        if not ("importlib" in filename and "_bootstrap" in filename):
            climbs += 1
            if filename != __file__:
                break
        frame = frame.f_back
    warnings.warn(
        f"{old} moved to {new}; the old path stops working in verihub 0.3", DeprecationWarning, stacklevel=climbs
    )


class _MovedModules:
    """A finder and loader (importlib's protocols; its ABCs would cost an import of importlib.resources),
    last on ``sys.meta_path``: asked only for names no real module has."""

    def __init__(self, moved: Mapping[str, str]) -> None:
        self.moved = moved

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if fullname not in self.moved:
            return None
        return ModuleSpec(fullname, self)  # type: ignore[arg-type]  # a Loader by protocol, not by its ABC

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        new = self.moved[spec.name]
        _deprecated(spec.name, new)
        return import_module(new)  # keeps its own __name__, __spec__ and __file__

    def exec_module(self, module: ModuleType) -> None:
        pass  # executed already, under its new name
