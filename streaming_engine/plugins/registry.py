"""One registry per plugin kind.

Built-in plugins register when their package is imported (``sources``,
``transforms``, ``sinks``); third-party plugins through ``importlib.metadata``
entry points in the groups ``streaming_engine.sources``,
``streaming_engine.transforms`` and ``streaming_engine.sinks``. An entry point
may name a plugin class (registered for you) or a module (registering on
import). Lookup is case-insensitive; a miss lists the available names, sorted;
registering the same name twice is an error, never a silent overwrite.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import threading
from typing import Generic, TypeVar

from streaming_engine.errors import PluginError
from streaming_engine.plugins.base import Plugin, PluginKind, Sink, Source, Transform

P = TypeVar("P", bound=Plugin)

_BUILTIN_PACKAGES = {"source": "sources", "transform": "transforms", "sink": "sinks"}


class Registry(Generic[P]):
    def __init__(self, kind: PluginKind, base: type[P]):
        self.kind = kind
        self.base = base
        self.group = f"streaming_engine.{_BUILTIN_PACKAGES[kind]}"
        self._plugins: dict[str, type[P]] = {}
        self._loaded = False
        self._lock = threading.RLock()

    def register(self, cls: type[P]) -> type[P]:
        if not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise PluginError(
                "PLUGIN.LOAD_FAILED",
                {"kind": self.kind, "entry": repr(cls), "detail": f"not a subclass of {self.base.__name__}"},
            )
        key = cls.name.lower()
        with self._lock:
            existing = self._plugins.get(key)
            if existing is not None and existing is not cls:
                raise PluginError(
                    "PLUGIN.DUPLICATE",
                    {"kind": self.kind, "name": cls.name, "first": _where(existing), "second": _where(cls)},
                )
            self._plugins[key] = cls
        return cls

    def unregister(self, name: str) -> None:
        """For tests and hot-reload tooling."""
        with self._lock:
            self._plugins.pop(name.lower(), None)

    def find(self, name: str) -> type[P] | None:
        self.load()
        return self._plugins.get(name.lower())

    def names(self) -> list[str]:
        self.load()
        return sorted((c.name for c in self._plugins.values()), key=str.lower)

    def load(self) -> None:
        """Import the built-in package and every entry point of this kind, once."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            _import_package(_BUILTIN_PACKAGES[self.kind])
            for ep in importlib.metadata.entry_points(group=self.group):
                try:
                    obj = ep.load()
                except Exception as e:  # a broken third-party plugin must say which one
                    raise PluginError(
                        "PLUGIN.LOAD_FAILED", {"kind": self.kind, "entry": ep.value, "detail": repr(e)}
                    ) from e
                if isinstance(obj, type):
                    self.register(obj)


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _import_package(package: str) -> None:
    pkg = importlib.import_module(package)
    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package}.{info.name}")


SOURCES: Registry[Source] = Registry("source", Source)
TRANSFORMS: Registry[Transform] = Registry("transform", Transform)
SINKS: Registry[Sink] = Registry("sink", Sink)

REGISTRIES: dict[str, Registry] = {"source": SOURCES, "transform": TRANSFORMS, "sink": SINKS}


def register(cls: type[P]) -> type[P]:
    """Class decorator: register a plugin in the registry of its kind."""
    return REGISTRIES[cls.kind].register(cls)  # type: ignore[return-value]
