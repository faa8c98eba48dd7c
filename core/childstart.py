"""Starting a child process of ours from a process that also runs other code.

multiprocessing starts a child (spawned, or forked from a forkserver) by running the parent's
`__main__` in it again when that module has a file: the Streamlit app, a pytest run, a script
a test ran as its main, the CLI. And a child inherits the parent's C environment, credentials
included. `starting_child()` is the one way this code base starts such a child: `__main__` is
an empty module and the environment holds no credential while the child starts, under one
lock for the whole process, so that two starts on two threads never restore each other's
stand-ins.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import types
from collections.abc import Iterator, Mapping

from pulsar_lens.core.settings import without_credentials_while

_lock = threading.Lock()


@contextlib.contextmanager
def starting_child(add: Mapping[str, str] | None = None) -> Iterator[None]:
    """Inside the block, a child process started (multiprocessing's spawn, or its forkserver
    and its workers) runs no `__main__` of ours and sees no credential; `add` is laid over
    its environment (see `without_credentials_while`)."""
    with _lock:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            with without_credentials_while(add or {}):
                yield
        finally:
            if main is not None:
                sys.modules["__main__"] = main
