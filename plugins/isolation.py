"""Third-party plugin code runs in a worker process, with a time and a memory limit.

Built-in analyses run in-process. Plugins from entry points and drop-in files are someone
else's code: their `analyze`, `render` and `param_choices` each run in a short-lived worker
forked from a forkserver (not from the dashboard's threaded process), under
`PULSAR_LENS_PLUGIN_TIMEOUT` (default 60 s) and `PULSAR_LENS_PLUGIN_MEMORY` (default 1 GiB,
as RLIMIT_DATA: the heap a worker may grow beyond what it holds when it starts, the modules
the forkserver preloads, some 180 MiB). A worker that hangs is killed; one that exits,
is killed by a signal or runs out of memory is reported as that plugin's failure
(`PluginRunError`), and nothing else stops. Drop-in files and entry-point modules are first
imported in a worker too (`probe_import`, at most `PULSAR_LENS_PLUGIN_IMPORT_TIMEOUT`,
10 s), so one that hangs or exits at import is a load failure, not a hung command; `probe`
does the same and sends back what a function says of the imported module (the listing of
`pulsar-lens plugins` learns of a drop-in this way, and imports it nowhere else).

Workers start without any credential: no token, password, OAuth2 setting or settings file
in their environment (`start_process`).

Arguments and answers cross by pickle: inputs (pandas frames), params as a dict (the
worker rebuilds them with the plugin's own `Params`), results and views. What a plugin
raises comes back as an `Origin` (`core.errors`): its traceback is formatted in the worker,
where its frames are, with the file and line in the plugin's own code.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import logging
import multiprocessing
import multiprocessing.connection
import os
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulsar_lens.core.allocators import ARROW_POOL_ENV
from pulsar_lens.core.childstart import starting_child
from pulsar_lens.core.config import GLOBAL_ENV
from pulsar_lens.core.errors import PluginRunError, SettingsError, origin_of
from pulsar_lens.core.parts import DEFAULT_PLUGIN_IMPORT_TIMEOUT as DEFAULT_IMPORT_TIMEOUT
from pulsar_lens.core.parts import DEFAULT_PLUGIN_MEMORY as DEFAULT_MEMORY
from pulsar_lens.core.parts import DEFAULT_PLUGIN_TIMEOUT as DEFAULT_TIMEOUT
from pulsar_lens.core.parts import PLUGIN_IMPORT_TIMEOUT_ENV as IMPORT_TIMEOUT_ENV
from pulsar_lens.core.parts import PLUGIN_MEMORY_ENV as MEMORY_ENV
from pulsar_lens.core.parts import PLUGIN_TIMEOUT_ENV as TIMEOUT_ENV
from pulsar_lens.core.parts import PluginLimits as Limits
from pulsar_lens.core.settings import Settings, drop_credentials
from pulsar_lens.plugins.builtin import BUILTIN_PLUGINS

__all__ = [
    "DEFAULT_IMPORT_TIMEOUT",
    "DEFAULT_MEMORY",
    "DEFAULT_TIMEOUT",
    "DROPIN_PREFIX",
    "ENTRY_POINT_GROUP",
    "IMPORT_TIMEOUT_ENV",
    "MEMORY_ENV",
    "PLUGIN_DIRS_ENV",
    "TIMEOUT_ENV",
    "Limits",
    "Locator",
    "call",
    "home_of",
    "limits_of",
    "locate",
    "probe",
    "probe_import",
    "third_party",
    "warm",
    "warm_for",
]

PLUGIN_DIRS_ENV = GLOBAL_ENV["plugin_dirs"]
log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "pulsar_lens.plugins"
PRELOAD = [
    "pulsar_lens.api",
    "pandas",
    "pyarrow",
    "altair",
    # what a worker unpickles before it runs a plugin's code: this module (every worker) and
    # the listing's `describe` with the validation it calls (a probe of `pulsar-lens
    # plugins`); imported in each worker, they took it 0.3-0.7 s (pydantic-settings) to start
    "pulsar_lens.plugins.isolation",
    "pulsar_lens.plugins.registry",
    "pulsar_lens.plugins.listing",
    # what a helper of a split results pass imports before its first plugin runs: the pass,
    # the store's readers and the built-ins it unpickles (plugins.splitpass); each helper
    # (two a pass) took 0.1-0.2 s of it again, a pass after a pass
    "pulsar_lens.plugins.precompute",
    "pyarrow.dataset",
    "pyarrow.parquet",
    *sorted({reference.partition(":")[0] for reference in BUILTIN_PLUGINS}),
]
DROPIN_PREFIX = "pulsar_lens_dropin_"
PARAMS_SECOND = ("analyze", "step", "render")
"""Hooks called as (data, params): the params cross to a worker as JSON and are validated
into the plugin's `Params` there."""


@dataclass(frozen=True)
class Locator:
    """Where a worker finds a plugin class: a file (drop-in) or a module, and the class."""

    kind: str  # "file" or "module"
    where: str  # file path, or module name
    module_name: str  # the module's name in the parent (drop-ins get a derived one)
    qualname: str = ""


def limits_of(settings: Settings) -> Limits:
    """The plugin limits of `settings`; the defaults (and a warning) when one is malformed,
    so the built-ins, which run in-process, still run."""
    try:
        return settings.plugin_limits
    except SettingsError as exc:
        log.warning("%s; using the default plugin limits", exc)
        return Limits()


def third_party(dirs: Sequence[Path], *, entry_points: bool = True) -> bool:
    """Whether discovering plugins will import third-party code (in a worker first): a
    drop-in file in `dirs`, or an installed package's entry point."""
    if entry_points and importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        return True
    return any(
        d.is_dir() and any(not p.name.startswith(("_", ".")) for p in d.glob("*.py")) for d in dirs
    )


def locate(cls: type) -> Locator:
    """The locator of a plugin class loaded by the registry."""
    module = sys.modules[cls.__module__]
    path = getattr(module, "__file__", None)
    if cls.__module__.startswith(DROPIN_PREFIX) and path:
        return Locator("file", path, cls.__module__, cls.__qualname__)
    return Locator("module", cls.__module__, cls.__module__, cls.__qualname__)


def home_of(cls: type) -> str | None:
    """Where the code of the plugin class `cls` lives: its file when it is a module of its
    own (a drop-in), else its package's folder. A failure's file and line are taken there."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    if not path:
        return None
    return str(Path(path).parent) if "." in cls.__module__ else str(path)


# --- the parent side -------------------------------------------------------------------------

_context: Any = None


def context() -> Any:
    """The forkserver context workers come from (libraries preloaded, no credential in its
    environment): this module's, and other short-lived helpers of ours (`plugins.splitpass`)."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def call(plugin: str, locator: Locator, method: str, args: tuple[Any, ...], limits: Limits) -> Any:
    """`method(*args)` of a fresh instance of the located plugin class, in a worker."""
    return _run(plugin, locator, method, args, limits, limits.timeout, what=method)


def probe_import(source: str, locator: Locator, limits: Limits) -> PluginRunError | None:
    """Import the file or module in a worker first: None when that worked, else why not
    (its `detail`, and its `origin` when the import raised)."""
    try:
        _run(source, locator, "", (), limits, limits.import_timeout, what="import")
    except PluginRunError as exc:
        return exc
    return None


def probe(source: str, locator: Locator, limits: Limits, describe: Callable[[Any], Any]) -> Any:
    """`describe(module)` of the file or module imported in a worker, under the limits of
    `probe_import` (whose failures it raises as PluginRunError): what the caller needs to know
    of third-party code without importing it itself. `describe` and what it returns cross by
    pickle."""
    return _run(source, locator, "", (describe,), limits, limits.import_timeout, what="import")


def _run(
    plugin: str,
    locator: Locator,
    method: str,
    args: tuple[Any, ...],
    limits: Limits,
    timeout: float,
    *,
    what: str,
) -> Any:
    ctx = context()
    receive, send = ctx.Pipe(duplex=False)
    worker = ctx.Process(
        target=_worker, args=(locator, method, args, limits.memory, send), daemon=True
    )
    try:
        start_process(worker)
    except (OSError, EOFError) as exc:
        # not the plugin's doing: the forkserver is gone, e.g. a stop signal sent to the
        # whole process group reached it while this process finished its work (before the
        # request reached it: an OSError; after, before it answered with the pid: EOFError)
        send.close()
        receive.close()
        detail = f"{what} could not start its worker process: {type(exc).__name__}: {exc}"
        raise PluginRunError(plugin, detail, phase=what) from exc
    send.close()
    try:
        answer = _wait(receive, worker, timeout)
    finally:
        receive.close()
        if worker.is_alive():
            worker.kill()
        worker.join(5)
    if answer is None:
        detail = f"{what} ended its worker process ({_exit(worker)})"
        raise PluginRunError(plugin, detail, phase=what)
    status, payload = answer
    if status == "timeout":
        limit = IMPORT_TIMEOUT_ENV if what == "import" else TIMEOUT_ENV
        detail = f"{what} timed out after {timeout:g} s; it was stopped"
        raise PluginRunError(plugin, detail, phase=what, limit=limit)
    if status == "ok":
        return payload
    if status == "memory":
        mib = limits.memory // (1024 * 1024)
        detail = f"{what} exceeded its memory limit of {mib} MiB ({MEMORY_ENV})"
        raise PluginRunError(plugin, detail, phase=what, limit=MEMORY_ENV)
    detail = f"{what} raised {payload}" if method else str(payload)
    raise PluginRunError(plugin, detail, phase=what, origin=payload)


def start_process(worker: Any) -> None:
    """Start a worker without it re-running our `__main__` (multiprocessing would run the
    parent's main script in the child: the Streamlit app, a pytest run, the CLI).

    The forkserver (started with the first worker, or again if it died) is started from the
    environment `without_credentials_while` makes: without any credential
    (`core.secrets.is_credential_var`), since a plugin is someone else's code and the
    forkserver's start environment is what its workers see, in `os.environ` and in
    /proc/self/environ alike; with Arrow's system allocator, whatever `core.allocators` chose
    for our own processes: mimalloc reserves a 1 GiB arena at its first allocation, which
    counts against RLIMIT_DATA, so under the default limit a plugin's first Arrow allocation
    failed. Workers fork from it, so they inherit that environment.
    """
    with starting_child({ARROW_POOL_ENV: "system"}):
        worker.start()


def warm_for(dirs: Sequence[Path], *, entry_points: bool = True) -> bool:
    """`warm()` when discovery over `dirs` (the settings' plugin folders) and the entry
    points will import third-party code; whether it did."""
    if not third_party([Path(d).expanduser() for d in dirs], entry_points=entry_points):
        return False
    try:
        warm()
    except OSError:  # the first probe starts it again, and says why when it cannot
        return False
    return True


def warm() -> None:
    """Start the forkserver now, when third-party plugins are about to be imported: its
    preload (pandas, pyarrow, altair, the API) runs in its own process while this one
    imports the built-ins, instead of after them at the first probe. `pulsar-lens plugins`
    with a drop-in folder took the two imports one after the other."""
    from multiprocessing import forkserver

    context()
    with starting_child({ARROW_POOL_ENV: "system"}):
        forkserver.ensure_running()


def _wait(receive: Any, worker: Any, timeout: float) -> tuple[str, Any] | None:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            worker.kill()
            return ("timeout", None)
        ready = multiprocessing.connection.wait([receive, worker.sentinel], timeout=left)
        if receive in ready:
            try:
                answer: tuple[str, Any] = receive.recv()
            except (EOFError, OSError):
                return None
            return answer
        if worker.sentinel in ready and not receive.poll():
            return None


def _exit(worker: Any) -> str:
    code = worker.exitcode
    if code is not None and code < 0:
        return f"killed by signal {-code}"
    return f"exit code {code}"


# --- the worker side -------------------------------------------------------------------------


def _worker(locator: Locator, method: str, args: tuple[Any, ...], memory: int, send: Any) -> None:
    # the forkserver was started without credentials (`start_process`); should other code of this
    # process have started it first, at least none is left in the worker's environment
    drop_credentials()
    os.dup2(2, 1)  # what a plugin prints goes to stderr: stdout carries `analyze --json`
    sys.stdout = sys.stderr
    limit = _data_size() + memory
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    cls: Any = None
    try:
        cls = _load(locator)
        if not method:  # a probe: the import alone, or what `describe` says of the module
            send.send(("ok", args[0](cls) if args else None))
            return
        instance = cls()
        if method in PARAMS_SECOND and len(args) == 2:
            data, params = args
            args = (data, cls.Params.model_validate(params))
        send.send(("ok", getattr(instance, method)(*args)))
    except MemoryError:
        send.send(("memory", None))
    except BaseException as exc:  # everything a plugin raises becomes its failure, as text:
        # its frames stay here, so the traceback is formatted here
        home = home_of(cls) if isinstance(cls, type) else _home_of(locator)
        send.send(("error", origin_of(exc, home=home)))
    finally:
        send.close()


def _data_size() -> int:
    """Bytes of this process's data segment now (VmData): the preloaded modules a worker
    starts with, which its memory limit comes on top of; 0 where /proc is not there."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _home_of(locator: Locator) -> str | None:
    """`home_of` for a plugin whose import failed: the file, or the module's package folder."""
    if locator.kind == "file":
        return locator.where
    module = sys.modules.get(locator.where.partition(".")[0])
    paths = list(getattr(module, "__path__", ()) or ())
    return str(paths[0]) if paths else getattr(module, "__file__", None)


def _load(locator: Locator) -> Any:
    if locator.kind == "file":
        spec = importlib.util.spec_from_file_location(locator.module_name, Path(locator.where))
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {locator.where}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[locator.module_name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(locator.where)
    obj: Any = module
    for part in locator.qualname.split(".") if locator.qualname else ():
        obj = getattr(obj, part)
    return obj
