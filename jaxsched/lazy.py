"""Package names that load their module on first use, so that importing a package does not
pay for JAX, pyarrow or SciPy before they are needed."""

from __future__ import annotations

import importlib


def lazy_names(package: str, exports: dict[str, str], submodules: tuple[str, ...] = ()):
    """(__getattr__, __dir__) for `package`: each name of `exports` (name -> submodule) is
    taken from its submodule on first use, each of `submodules` imported on first use."""
    module = importlib.import_module(package)
    names = sorted(exports) + list(submodules)

    def __getattr__(name: str):
        if name in exports:
            value = getattr(importlib.import_module(f".{exports[name]}", package), name)
        elif name in submodules:
            value = importlib.import_module(f".{name}", package)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(module, name, value)
        return value

    def __dir__():
        return sorted(set(vars(module)) | set(names))

    return __getattr__, __dir__
