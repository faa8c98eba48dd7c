"""`pulsar-lens import DIR`: dumps of admin answers from a cluster this machine cannot reach
(what `pulsar-admin` printed, or the admin REST API answered, saved as files) into the store,
one snapshot per capture, as `pulsar-lens collect` would have stored its polls.

DIR is one capture folder or a folder of them; docs/import.md says what a capture holds and
how to make one. Then, as the collect process does after a poll, each imported cluster's
newest snapshot is analysed by every light plugin and the results stored, so the pages,
`/metrics` and `pulsar-lens analyze` read them rather than analysing on each look. Exit
status: 0 when every capture was stored, 1 when one was refused (the others are stored;
nothing of a refused one is), 2 for a usage or settings error. An analysis that fails is
named, its reason logged; it changes no exit status (the snapshots are stored).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pulsar_lens.cli.arguments import settings_of
from pulsar_lens.core.errors import DumpRefused, SettingsError, SnapshotError
from pulsar_lens.core.names import NameRefused, named_entity
from pulsar_lens.core.storeroot import check_root

if TYPE_CHECKING:  # the dumps' readers and the store (pyarrow, pandas) load once it runs
    from pulsar_lens.core.model import Snapshot
    from pulsar_lens.core.settings import Settings
    from pulsar_lens.core.store import Store


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "import",
        help="store dumps of pulsar-admin / admin REST answers as snapshots",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dir", help="a capture folder, or a folder of capture folders")
    p.add_argument("--store", metavar="DIR", help="store folder (default PULSAR_LENS_STORE)")
    p.add_argument(
        "--cluster",
        metavar="NAME",
        help="the cluster's name (default: the one the capture's clusters-list names)",
    )
    p.set_defaults(func=run_import)


def run_import(args: argparse.Namespace) -> int:
    settings = settings_of(args)  # before the store's imports: a refusal costs no pyarrow
    from pulsar_lens.collectors.dumps import capture_folders, read_capture
    from pulsar_lens.core.store import Store

    if args.cluster is not None:
        try:
            named_entity("cluster", args.cluster)
        except NameRefused as exc:
            raise SettingsError(f"--cluster: {exc}") from None
    store = Store(check_root(Path(args.store or settings.store_dir), writable=True))
    refusals: list[str] = []
    read: dict[tuple[str, object], tuple[Path, Snapshot]] = {}
    for folder in capture_folders(Path(args.dir)):
        try:
            snapshot = read_capture(folder, cluster=args.cluster, cap=settings.max_response)
        except DumpRefused as exc:
            refusals.append(str(exc))
            continue
        key = (snapshot.cluster, snapshot.collected_at)
        if key in read:
            refusals.append(
                f"{_shown(folder)}: captured at the same time as {_shown(read[key][0])} "
                "(one snapshot per capture time); left out"
            )
            continue
        read[key] = (folder, snapshot)
    clusters = _store(store, [read[key] for key in sorted(read, key=lambda k: k[1])], refusals)
    for refusal in refusals:
        print(f"pulsar-lens import: refused {refusal}", file=sys.stderr)
    stored = sum(clusters.values())
    print(f"imported {stored} of {stored + len(refusals)} capture(s) into {store.root}")
    if clusters:
        _analyse(store, list(clusters), settings)
    return 1 if refusals else 0


def _analyse(store: Store, clusters: list[str], settings: Settings) -> None:
    """Each cluster's newest snapshot analysed by the light plugins, results stored."""
    from pulsar_lens.cli.collect_parts import compute_per_cluster, loaded_plugins
    from pulsar_lens.plugins.results import ResultStore

    plugins = loaded_plugins(settings, "import")
    outcomes = compute_per_cluster(store, plugins, ResultStore(store.root), clusters)
    for cluster, done in outcomes.items():  # each failure was logged with its reason
        failed = [o.plugin for o in done if o.status == "failed"]
        seconds = sum(o.seconds for o in done)
        print(
            f"analysed the newest snapshot of {cluster}: {len(done) - len(failed)} of "
            f"{len(done)} analyses stored ({seconds:.1f} s)"
            + (f"; failed: {', '.join(failed)}" if failed else "")
        )


def _store(
    store: Store, captures: list[tuple[Path, Snapshot]], refusals: list[str]
) -> dict[str, int]:
    """Write each snapshot, oldest first, with the events since the one before it of its
    cluster (the store's newest before it, for the first): as a polling loop would. Returns
    how many each cluster got, of the clusters that got one."""
    from pulsar_lens.collectors.events import carry_forward, diff
    from pulsar_lens.collectors.restore import restore_latest

    previous: dict[str, Snapshot | None] = {}
    stored: dict[str, int] = {}
    for folder, snapshot in captures:
        cluster = snapshot.cluster
        if cluster not in previous:
            try:
                previous[cluster] = restore_latest(store, cluster, before=snapshot.collected_at)
            except SnapshotError:
                previous[cluster] = None  # an unreadable store costs these events only
        before = previous[cluster]
        events = diff(before, snapshot) if before is not None else ()
        try:
            sid = store.write(snapshot, events=events)
        except SnapshotError as exc:
            refusals.append(f"{_shown(folder)}: {exc}")
            continue
        previous[cluster] = carry_forward(before, snapshot)
        stored[cluster] = stored.get(cluster, 0) + 1
        print(_line(folder, sid, snapshot))
    return stored


def _line(folder: Path, sid: str, snapshot: Snapshot) -> str:
    partial = f"; partial: {len(snapshot.errors)} error(s)" if snapshot.errors else ""
    return (
        f"{_shown(folder)}: snapshot {sid[:19]} of {snapshot.cluster} at "
        f"{snapshot.collected_at.isoformat()}: {len(snapshot.topics)} topic(s), "
        f"{len(snapshot.subscriptions)} subscription(s), {len(snapshot.consumers)} "
        f"consumer(s){partial}"
    )


def _shown(folder: Path) -> str:
    from pulsar_lens.collectors.dumpfiles import shown_path

    return shown_path(folder)
