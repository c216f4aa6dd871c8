"""JVM handles looked up once per py4j gateway (used by the runtime and the
commit code alike; nothing here starts a JVM)."""

from __future__ import annotations

from typing import Any, Callable


def jvm_constant(jvm: Any, name: str, make: Callable[[], Any]) -> Any:
    """A JVM object built once per gateway (py4j charges a round trip for
    every package segment and call, and these are asked for every epoch)."""
    key = (id(jvm), name)
    if key not in _JVM_CONSTANTS:
        _JVM_CONSTANTS[key] = make()
    return _JVM_CONSTANTS[key]


def jvm_class(jvm: Any, name: str) -> Any:
    """A JVM class by its dotted name, looked up once; None when the class is
    not on the class path (py4j then answers with a package)."""
    from functools import reduce

    from py4j.java_gateway import JavaPackage

    def find() -> Any:
        found = reduce(getattr, name.split("."), jvm)
        return None if isinstance(found, JavaPackage) else found

    return jvm_constant(jvm, name, find)


_JVM_CONSTANTS: dict[tuple[int, str], Any] = {}
