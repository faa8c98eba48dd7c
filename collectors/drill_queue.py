"""Drills asked for from the dashboard and run by the collect process.

The dashboard holds no credentials and never talks to the cluster; the collect process does.
So a drill button writes a request into the store, naming the logged-in user who asked, and
the collect process runs it with its own admin client and records how it went. Anyone who can
write to the store folder can write a request too, so the collect process checks each one
against its own settings first: it refuses (and records why) a request that names no user, or
any request while PULSAR_LENS_ALLOW_MUTATIONS or PULSAR_LENS_DASHBOARD_MUTATIONS is off there.

    drills/requests/<id>.json   a drill waiting (removed when it starts)
    drills/status/<id>.json     each drill's state and steps (the newest STATUS_KEPT kept)

The rows and polls a drill makes go to the store like any others, so the Bundles & unloads
page shows its result once it is done.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pulsar_lens.core.jsonfiles import json_files, write_json
from pulsar_lens.core.mutations import (
    MutationSettings,
    dashboard_mutations_problem,
    requester_of,
)
from pulsar_lens.core.secrets import clean

log = logging.getLogger(__name__)

DRILLS_DIR = "drills"
STATUS_KEPT = 50
State = Literal["queued", "running", "done", "failed", "refused"]


@dataclass(frozen=True)
class DrillStatus:
    id: str
    bundle: str  # "tenant/ns/0x.._0x.."
    to: str | None = None
    state: State = "queued"
    requested_at: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat())
    steps: tuple[str, ...] = ()
    error: str | None = None
    owner_before: str | None = None
    owner_after: str | None = None
    requested_by: str | None = None  # the logged-in user who asked, as the dashboard knew them

    @property
    def ended(self) -> bool:
        return self.state in ("done", "failed", "refused")


class DrillQueue:
    def __init__(self, store_root: str | Path) -> None:
        self.store_root = Path(store_root)
        self.root = Path(store_root) / DRILLS_DIR

    def request(self, bundle: str, to: str | None = None, *, requested_by: str) -> DrillStatus:
        """Queue a drill on `bundle` (tenant/ns/range) asked for by the user `requested_by`;
        the collect process runs it."""
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
        status = DrillStatus(
            id=f"{stamp}-{uuid.uuid4().hex[:6]}",
            bundle=bundle,
            to=to or None,
            requested_by=requested_by,
        )
        self._save(status)
        write_json(
            self.root / "requests" / f"{status.id}.json", asdict(status), store_root=self.store_root
        )
        return status

    def status(self, drill_id: str) -> DrillStatus | None:
        return _read(self.root / "status" / f"{drill_id}.json")

    def latest(self) -> DrillStatus | None:
        files = json_files(self.root / "status", store_root=self.store_root)
        return _read(files[-1]) if files else None

    def take(self) -> DrillStatus | None:
        """The oldest request, removed from the queue; None when there is none. Only what a
        request holds is kept from its file, and its id is the file's name: the status it
        gets must not land outside the status folder, nor claim a state or steps."""
        for path in json_files(self.root / "requests", store_root=self.store_root):
            found = _read(path)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            if found is not None:
                return DrillStatus(
                    id=path.stem,
                    bundle=found.bundle,
                    to=found.to,
                    requested_at=found.requested_at,
                    requested_by=found.requested_by,
                )
        return None

    def _save(self, status: DrillStatus) -> DrillStatus:
        write_json(
            self.root / "status" / f"{status.id}.json", asdict(status), store_root=self.store_root
        )
        for old in json_files(self.root / "status", store_root=self.store_root)[:-STATUS_KEPT]:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
        return status

    def save(self, status: DrillStatus) -> DrillStatus:
        return self._save(status)


def refusal(status: DrillStatus, switches: MutationSettings) -> str | None:
    """Why the collect process, with its mutation `switches`, must not run this request; None
    when it may."""
    off = dashboard_mutations_problem(switches)
    if off is not None:
        return f"the collect process takes no drill from the dashboard: {off} there"
    if requester_of(status.requested_by) is None:
        return "the request names no logged-in user; only a logged-in user may ask for a drill"
    return None


def _read(path: Path) -> DrillStatus | None:
    try:
        raw = json.loads(path.read_text())
        known = {k: raw[k] for k in DrillStatus.__dataclass_fields__ if k in raw}
        known["steps"] = tuple(known.get("steps") or ())
        return DrillStatus(**known)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:  # a damaged file is skipped, not fatal
        log.warning("drill file %s is unreadable: %s", path, exc)
        return None


RunFn = Callable[[DrillStatus, Callable[[str], None]], Mapping[str, Any]]


@dataclass
class DrillService:
    """A thread of the collect process that runs queued drills one at a time. `run` carries a
    drill out (with the process's admin client) and answers owners before and after; a request
    `refusal` turns down under the process's mutation switches `mutations` is not run."""

    queue: DrillQueue
    run: RunFn
    every: float = 1.0
    mutations: MutationSettings = field(default_factory=MutationSettings)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def start(self) -> DrillService:
        self._thread = threading.Thread(target=self._loop, name="drills", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=180)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.step()

    def step(self) -> DrillStatus | None:
        """Run the oldest queued drill, if any; its final status."""
        status = self.queue.take()
        if status is None:
            return None
        refused = refusal(status, self.mutations)
        if refused is not None:
            log.warning(
                "drill %s on %s asked for by %s refused: %s",
                status.id,
                clean(status.bundle),
                clean(status.requested_by),
                refused,
            )
            return self.queue.save(replace(status, state="refused", error=refused))
        status = self.queue.save(replace(status, state="running"))
        steps: list[str] = []

        def progress(line: str) -> None:
            steps.append(line)
            self.queue.save(replace(status, steps=tuple(steps)))

        try:
            found = self.run(status, progress)
            done = replace(
                status,
                state="done",
                steps=tuple(steps),
                owner_before=found.get("owner_before"),
                owner_after=found.get("owner_after"),
            )
        except Exception as exc:  # reported in its status, never fatal to the collector
            log.warning("drill %s failed: %s", status.id, clean(str(exc)))
            done = replace(status, state="failed", steps=tuple(steps), error=clean(str(exc)))
        return self.queue.save(done)
