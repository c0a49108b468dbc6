"""``from raypipe.fn.readers import file`` and ``import raypipe.ops.transforms``: DALI's ``fn`` and
``ops`` namespaces are packages there, and scripts import from them. Here ``fn`` and ``ops`` resolve
operator names on attribute access, so each namespace is also entered in ``sys.modules`` as a small
module whose attributes are the namespace's."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any


class NamespaceModule(types.ModuleType):
    """A module standing for an operator namespace (``raypipe.fn.readers``)."""

    def __init__(self, name: str, namespace: Any):
        super().__init__(name)
        self._namespace = namespace

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.__dict__["_namespace"], attr)

    def __dir__(self) -> list[str]:
        return dir(self.__dict__["_namespace"])

    def __reduce__(self) -> tuple[Callable[[str], Any], tuple[str]]:
        """Pickled by name (cloudpickle ships the submodules a function's code reaches): imported
        again where it is loaded."""
        return importlib.import_module, (self.__name__,)


def register(package: str, op_names: Iterable[str], namespace: Callable[[str], Any]) -> None:
    """Enter ``package.<prefix>`` for every dotted prefix of ``op_names`` (``readers``,
    ``experimental.readers``...), made by ``namespace(prefix + ".")``."""
    prefixes = set()
    for name in op_names:
        parts = name.split(".")[:-1]
        prefixes.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    for prefix in sorted(prefixes):
        sys.modules.setdefault(f"{package}.{prefix}", NamespaceModule(f"{package}.{prefix}", namespace(f"{prefix}.")))
