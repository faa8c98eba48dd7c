"""A results pass on two cores, run in helper processes beside the collect process.

The light pass runs every plugin one after the other on one pinned snapshot. Between polls
the collect process has nothing else to do, yet the pass kept one core busy and left the
other idle: at 100,000 topics some 4 s of analyses on a 2-core machine. `Splitter` puts the
plugins in two parts of about equal time and hands each to a helper process forked for the
pass (from the forkserver that already serves third-party plugins, its libraries preloaded):

- plugins that build on one another (`requires`) stay in one part, so each still reads the
  result just stored for the other; third-party plugins, and what they build on, stay in the
  collect process (they run in workers of their own anyway);
- the parts are balanced by what each plugin took in the previous pass; a pass splits only
  when that pass took `min_seconds` or more, or none was timed yet (`Splitter.wanted`), and
  the process may use two CPUs or more (affinity and the cgroup's CPU quota), since forking a
  helper costs a tenth or two of a second;
- neither part runs in the collect process: what a pass allocates (its windows grow with the
  polls, up to 60 of them) goes back to the system when its helper ends, instead of staying
  with the collect process's allocators from pass to pass (at 100,000 topics the collect
  process's peak grew poll by poll from 0.8 to 1.4 GiB when it ran one part itself);
- a helper allocates Arrow's memory from the collect process's pool (jemalloc,
  `core.allocators`), not from the forkserver's system allocator: at 1,000,000 topics a
  split pass took 30.1-34.4 s of wall and 55-60 s of CPU so, 34.6-39.6 s and 65-74 s before;
- a helper reads the same pinned view (store root, cluster, `upto`), writes its results into
  the same `ResultStore` (each entry renamed into place: no two writers meet), and sends back
  its outcomes. Should one fail to start or die, its plugins are analysed here after the
  others, and the pass says so in the log; a stop asked for mid-pass reaches them too.

Each part shares its own table reads (`SharedReads`): tables both parts read are read twice.
"""

from __future__ import annotations

import gc
import logging
import math
import multiprocessing.connection
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pulsar_lens.api import AnalysisPlugin
from pulsar_lens.core.allocators import arrow_pool, use_arrow_pool
from pulsar_lens.core.clusterview import ClusterView
from pulsar_lens.core.cpus import usable_cpus
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.registry import LoadedPlugin, instance_of
from pulsar_lens.plugins.results import ResultStore

log = logging.getLogger(__name__)

Plugin = AnalysisPlugin | LoadedPlugin
MIN_SECONDS = 2.0
"""A pass splits only when the previous one took this long: below it the fork costs more
than the second core gives back."""
STOP_GRACE = 3.0
"""Seconds a helper asked to stop may take to finish the plugin it is in before it is killed:
within the 5 s the collect process gives its results thread when it stops."""


def parts(
    plugins: Sequence[Plugin], seconds: Mapping[str, float]
) -> tuple[list[Plugin], list[Plugin]]:
    """(first, second): `plugins` in two parts of about equal `seconds` (a plugin not timed
    yet counts as the mean of the others), each in the given order. Plugins linked by
    `requires` share a part; a third-party plugin's group is in the first (`staying`)."""
    names = [instance_of(p).name for p in plugins]
    root = _groups(plugins)
    known = [s for n in names if (s := seconds.get(n)) is not None and math.isfinite(s)]
    default = sum(known) / len(known) if known else 1.0
    weight: dict[str, float] = {}
    for name in names:
        weight[root[name]] = weight.get(root[name], 0.0) + max(seconds.get(name, default), 0.0)
    stays = {root[instance_of(p).name] for p in staying(plugins)}
    first_load = sum(weight[g] for g in stays)
    second_load = 0.0
    second: set[str] = set()
    for top in sorted(set(weight) - stays, key=lambda g: (-weight[g], g)):
        if second_load < first_load:
            second.add(top)
            second_load += weight[top]
        else:
            first_load += weight[top]
    return (
        [p for p, n in zip(plugins, names, strict=True) if root[n] not in second],
        [p for p, n in zip(plugins, names, strict=True) if root[n] in second],
    )


def staying(plugins: Sequence[Plugin]) -> list[Plugin]:
    """The plugins no helper takes: each third-party plugin (`isolated`) and every plugin
    linked to one by `requires`, in the given order."""
    root = _groups(plugins)
    stays = {root[instance_of(p).name] for p in plugins if getattr(p, "isolated", False)}
    return [p for p in plugins if root[instance_of(p).name] in stays]


def _groups(plugins: Sequence[Plugin]) -> dict[str, str]:
    """Each plugin's name -> the name that stands for its group (plugins linked by
    `requires`, directly or not)."""
    group = {instance_of(p).name: instance_of(p).name for p in plugins}

    def root(name: str) -> str:
        while group[name] != name:
            name = group[name]
        return name

    for plugin in plugins:
        for required in instance_of(plugin).requires:
            if required in group:
                group[root(required)] = root(instance_of(plugin).name)
    return {name: root(name) for name in group}


class Splitter:
    """Splits the passes of one collect process (see the module docstring); remembers what
    each plugin took so the next pass is balanced on it."""

    def __init__(self, *, min_seconds: float = MIN_SECONDS, cpus: float | None = None) -> None:
        self.min_seconds = min_seconds
        self.cpus = usable_cpus() if cpus is None else cpus
        self.seconds: dict[str, float] = {}
        self.last_pass_seconds: float | None = None  # no pass timed yet

    def wanted(self, view: object, plugins: Sequence[Plugin]) -> bool:
        """Whether this pass splits: two CPUs or more, a pinned view of a store, plugins a
        helper may take, and a previous pass long enough or none timed yet. A first pass on
        a new store is split blind (its parts the same size), since how long it takes is
        not known: at a million topics it took 34 s and raised the collect process's peak
        by 1.2 GiB, which a helper gives back; on a small store it costs a fork, once."""
        return (
            self.cpus >= 2
            and isinstance(view, ClusterView)
            and view.upto is not None  # both processes on the same snapshots
            and type(view.store) is Store
            and (self.last_pass_seconds is None or self.last_pass_seconds >= self.min_seconds)
            and len(plugins) > 1
        )

    def seed(self, results: ResultStore, plugins: Sequence[Plugin]) -> None:
        """What each of `plugins` took when its newest stored result was computed (a collect
        process started again on a store): its first pass is then split like the next ones,
        instead of running on one core first (minutes at a million topics)."""
        from pulsar_lens.plugins.runner import validate_params

        newest: dict[str, tuple[str, float]] = {}
        for plugin in plugins:
            instance = instance_of(plugin)
            defaults = validate_params(instance, None).model_dump(mode="json")
            for _, meta in results.entries(instance.name):
                at, seconds = str(meta.get("computed_at") or ""), meta.get("seconds")
                if meta.get("params") != defaults or not isinstance(seconds, int | float):
                    continue  # a page's other parameters: not what a pass runs
                if at >= newest.get(instance.name, ("", 0.0))[0]:
                    newest[instance.name] = (at, float(seconds))
        self.seconds.update({name: seconds for name, (_, seconds) in newest.items()})
        if newest:
            self.last_pass_seconds = sum(seconds for _, seconds in newest.values())

    def remember(self, outcomes: Sequence[Any]) -> None:
        """The seconds of each plugin's outcome, for the next split."""
        ran = [o for o in outcomes if o.status in ("ok", "failed")]
        for outcome in ran:
            self.seconds[outcome.plugin] = outcome.seconds
        if ran:
            self.last_pass_seconds = sum(o.seconds for o in ran)


def run_split(
    view: ClusterView,
    plugins: Sequence[Plugin],
    here_pass: Callable[[Sequence[Plugin]], list[Any]],
    *,
    results_store: Path,
    seconds: Mapping[str, float],
    stop: Callable[[], bool],
) -> list[Any]:
    """The outcomes of `plugins` on `view`, in their order: each of the two `parts` in a
    helper process, the plugins `staying` through `here_pass` in this process meanwhile.
    A helper that cannot start or dies leaves its plugins to `here_pass` after the others."""
    if stop():  # stopping: no process started for plugins that will not run
        return here_pass(plugins)
    stays = staying(plugins)
    kept = {id(p) for p in stays}
    away = [[p for p in part if id(p) not in kept] for part in parts(plugins, seconds)]
    helpers = [(part, _Helper.start(view, part, results_store)) for part in away if part]
    started = [helper for _, helper in helpers if helper is not None]

    def stopping() -> bool:  # a stop reaches every helper at once, not one after the other
        if stop():
            for helper in started:
                helper.ask_stop()
            return True
        return False

    outcomes: list[Any] = []
    try:
        outcomes += here_pass(stays) if stays else []
        answers = [(part, helper.wait(stopping) if helper else None) for part, helper in helpers]
    finally:
        for _, helper in helpers:
            if helper is not None:
                helper.close()
    for (part, theirs), (_, helper) in zip(answers, helpers, strict=True):
        if theirs is None:
            if stop():
                continue
            names = ", ".join(instance_of(p).name for p in part)
            why = helper.why if helper is not None else "it could not start"
            log.warning("an analyses helper process failed (%s); analysing %s here", why, names)
            theirs = here_pass(part)
        outcomes += theirs
    return _in_order(plugins, outcomes)


def _in_order(plugins: Sequence[Plugin], outcomes: Sequence[Any]) -> list[Any]:
    rank = {instance_of(p).name: i for i, p in enumerate(plugins)}
    return sorted(outcomes, key=lambda o: rank.get(o.plugin, len(rank)))


class _Helper:
    """One helper process for one pass."""

    def __init__(self, process: Any, receive: Any, stopping: Any) -> None:
        self.process = process
        self.receive = receive
        self.stopping = stopping
        self.stopped_at: float | None = None
        self.why = ""

    @classmethod
    def start(
        cls, view: ClusterView, plugins: Sequence[Plugin], results_store: Path
    ) -> _Helper | None:
        from pulsar_lens.plugins import isolation

        ctx = isolation.context()
        receive, send = ctx.Pipe(duplex=False)
        stopping = ctx.Event()
        # the helper's Arrow pool is ours, not the forkserver's
        where = (str(view.store.root), view.cluster, view.upto)
        args = (*where, list(plugins), str(results_store), arrow_pool())
        process = ctx.Process(
            target=_helper_main, args=(*args, stopping, send), name="analyses-helper", daemon=True
        )
        try:
            isolation.start_process(process)
        except (OSError, EOFError) as exc:
            # the forkserver is gone or going: a stop signal sent to the whole process group
            # (`serve` stopping, Ctrl-C) reached it too; the pass goes on here
            log.warning("the analyses helper process could not start: %r", exc)
            receive.close()
            send.close()
            return None
        send.close()
        return cls(process, receive, stopping)

    def wait(self, stop: Callable[[], bool]) -> list[Any] | None:
        """Its outcomes; None when it died, or was stopped before it sent them (`STOP_GRACE`
        after it was asked to)."""
        while True:
            ready = multiprocessing.connection.wait([self.receive, self.process.sentinel], 0.5)
            if self.receive in ready:
                try:
                    answer: list[Any] = self.receive.recv()
                except (EOFError, OSError):  # it ended without an answer
                    self._ended()
                    return None
                return answer
            if self.process.sentinel in ready and not self.receive.poll():
                self._ended()
                return None
            if stop():
                self.ask_stop()
            if self.stopped_at is not None and time.monotonic() - self.stopped_at > STOP_GRACE:
                self.why = "stopped"
                return None

    def ask_stop(self) -> None:
        """Ask it to stop after the plugin it is in (once)."""
        if self.stopped_at is None:
            self.stopping.set()
            self.stopped_at = time.monotonic()

    def _ended(self) -> None:
        """Say why it ended (`why`) once it is gone."""
        self.process.join(5)
        code = self.process.exitcode
        self.why = (
            f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        )

    def close(self) -> None:
        self.receive.close()
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)


def _helper_main(
    root: str,
    cluster: str | None,
    upto: Any,
    plugins: list[Plugin],
    results_store: str,
    pool: str,
    stopping: Any,
    send: Any,
) -> None:
    """In the helper: the pass of `plugins` on the same pinned view, with Arrow's memory
    pool `pool` (the collect process's); the outcomes sent back."""
    from pulsar_lens.core.settings import drop_credentials
    from pulsar_lens.plugins.precompute import run_pass
    from pulsar_lens.plugins.results import ResultStore

    drop_credentials()  # it needs none: it reads the store and writes results
    use_arrow_pool(pool)
    # what it was forked with (the forkserver's preloaded libraries) is never garbage: a
    # full collection then walks only what the pass makes (one process's whole pass at
    # 100,000 topics: 0.17 s of full collections instead of 0.34 s)
    gc.freeze()
    try:
        view = ClusterView(Store(root), cluster, upto=upto)
        results = ResultStore(results_store)
        send.send(run_pass(view, plugins, results, stop=stopping.is_set))
    finally:
        send.close()
