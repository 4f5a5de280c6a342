"""The grammar of every subcommand, built without the library behind it.

``ringkit --help`` (and every subcommand's ``--help``) should answer at once, like ``git`` or
``kubectl``, so the parsers live apart from the code that runs the commands: these modules import
argparse and the argument types of :mod:`ringkit.commands.common`, never numpy, rich, the cache
client or a command's own module. Each module offers ``register(subparsers)``; the ``run`` it sets
is :func:`deferred`, which imports the command's module only when that command runs. Names the
parsers need from the library (hash functions, strategies, defaults) are copied in
:mod:`ringkit.commands.parsers.names`, and a test keeps the copies equal to the library's.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

__all__ = ["Runner", "deferred"]

Runner = Callable[[argparse.Namespace], int]


def deferred(module_name: str, function: str = "run") -> Runner:
    """Return a runner that imports `module_name` and calls its `function` with the arguments.

    >>> runner = deferred("ringkit.commands.lookup")
    >>> runner.__qualname__
    'ringkit.commands.lookup.run'
    """

    def run(args: argparse.Namespace) -> int:
        module = importlib.import_module(module_name)
        status: int = getattr(module, function)(args)
        return status

    run.__qualname__ = f"{module_name}.{function}"
    return run
