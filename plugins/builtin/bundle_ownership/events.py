"""`bundle-ownership`'s events between consecutive snapshots: owner changes, unloads that
completed between two polls (every consumer reconnected), splits, and the bundle events the
collector stored (see the package for the rules)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pandas as pd

from pulsar_lens.core.unsure import Unsure, unsure_of_stored
from pulsar_lens.plugins.builtin.bundle_ownership.renewals import Renewals

EVENT_COLUMNS = ["at", "kind", "namespace", "bundle", "before", "after", "detail", "source"]


def _owner(value: Any) -> str | None:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def _keys(bundles: pd.DataFrame) -> list[tuple[str, str]]:
    """(namespace, bundle) of each row."""
    return list(zip(bundles["namespace"].tolist(), bundles["bundle"].tolist(), strict=True))


def snapshots_of(frame: pd.DataFrame, ids: Sequence[str]) -> dict[str, pd.DataFrame]:
    """The rows of each of `ids`, by snapshot id (ids without rows are left out)."""
    wanted = set(ids)  # a list would be scanned once per snapshot: quadratic in the history
    return {sid: part for sid, part in frame.groupby("snapshot_id", sort=False) if sid in wanted}


def compute_events(
    bundles: pd.DataFrame,
    snapshots: pd.DataFrame,
    reloaded: Mapping[str, Mapping[tuple[str, str], int]],
) -> pd.DataFrame:
    """Ownership events between consecutive snapshots (those that list bundles), newest
    first. `snapshots` is the store's index: each id once, oldest first. `reloaded`: the
    bundles each poll found reloaded (`steps.reloaded_by_poll`, or `whole_window`)."""
    ids = [str(s) for s in snapshots["snapshot_id"]] if len(snapshots) else []
    by_snapshot = snapshots_of(bundles, ids)
    last_owner: dict[tuple[str, str], str] = {}
    rows: list[dict[str, Any]] = []
    previous: pd.DataFrame | None = None
    errors = snapshots["errors_json"] if "errors_json" in snapshots else [None] * len(ids)
    for sid, at, errors_json in zip(ids, snapshots["collected_at"], errors, strict=True):
        current = by_snapshot.get(sid)
        if current is None:
            continue
        current = _settled(previous, current, unsure_of_stored(errors_json))
        reconnected = reloaded.get(sid, {})
        if previous is not None:
            rows.extend(_owner_events(previous, current, at, last_owner, reconnected))
            rows.extend(_listing_events(previous, current, at))
        for key, value in zip(_keys(current), current["owner_broker"].tolist(), strict=True):
            owner = _owner(value)
            if owner is not None:
                last_owner[key] = owner
        previous = current
    frame = pd.DataFrame(rows, columns=EVENT_COLUMNS)
    return frame.sort_values("at", ascending=False, kind="stable").reset_index(drop=True)


def whole_window(
    bundles: pd.DataFrame,
    topics: pd.DataFrame,
    consumers: pd.DataFrame,
    snapshots: pd.DataFrame,
) -> dict[str, dict[tuple[str, str], int]]:
    """The bundles each poll that lists bundles found reloaded, from the whole window of
    topics and consumers at once (`Renewals`): what `steps.reloaded_by_poll` puts together
    from steps."""
    ids = [str(s) for s in snapshots["snapshot_id"]] if len(snapshots) else []
    listing = set(bundles["snapshot_id"].astype(str)) if len(bundles) else set()
    polls = [
        (sid, at) for sid, at in zip(ids, snapshots["collected_at"], strict=True) if sid in listing
    ]
    renewals = Renewals(topics, consumers, [sid for sid, _ in polls])
    found = {}
    for k, (sid, _) in enumerate(polls):
        answer = renewals.next(polls[k - 1][1] if k else None)
        if answer:
            found[sid] = answer
    return found


def _settled(previous: pd.DataFrame | None, current: pd.DataFrame, unsure: Unsure) -> pd.DataFrame:
    """`current` with what its poll's failed calls left unknown kept from `previous`: a bundle
    listed unowned because its owner's ownedNamespaces call failed is still that broker's (a
    broker that stops answering for a moment has not unloaded anything), and a namespace
    whose bundle list failed keeps its bundles. A poll that could not list the cluster at all
    changes nothing."""
    if previous is None:
        return current
    if unsure.everything:
        return previous
    if not unsure.bundles:
        return current
    last = {
        (ns, b): _owner(o)
        for ns, b, o in zip(
            previous["namespace"], previous["bundle"], previous["owner_broker"], strict=True
        )
    }
    keys = zip(current["namespace"], current["bundle"], current["owner_broker"], strict=True)
    settled = current.copy()
    settled["owner_broker"] = pd.Series(
        [unsure.owner(_owner(o), last.get((ns, b))) for ns, b, o in keys],
        index=current.index,
        dtype=object,
    )
    unlisted = unsure.namespaces - set(current["namespace"])
    if unlisted:
        settled = pd.concat([settled, previous[previous["namespace"].isin(unlisted)]])
    return settled


def _owner_events(
    previous: pd.DataFrame,
    current: pd.DataFrame,
    at: Any,
    last_owner: Mapping[tuple[str, str], str],
    reconnected: Mapping[tuple[str, str], int],
) -> Iterator[dict[str, Any]]:
    before = dict(zip(_keys(previous), map(_owner, previous["owner_broker"].tolist()), strict=True))
    for key, owner in zip(_keys(current), current["owner_broker"].tolist(), strict=True):
        if key not in before:
            continue
        old, new = before[key], _owner(owner)
        kind, detail = _transition(old, new, last_owner.get(key), reconnected.get(key, 0))
        if kind:
            yield _event(at, kind, key, old, new, detail)


def _transition(
    old: str | None, new: str | None, last: str | None, reconnected: int
) -> tuple[str | None, str]:
    if old and new and old != new:
        return "moved", f"from {old} to {new}"
    if old and not new:
        return "unloaded", f"{old} no longer owns it"
    if not old and new:
        if new == last:
            return "reacquired", f"{new} owns it again after an unload"
        return "acquired", f"{new} took it" + (f" (last owner {last})" if last else "")
    if old and new == old and reconnected:
        return "reloaded", (
            f"all {reconnected} client(s) of its topics reconnected while {old} kept it: "
            "unloaded and re-acquired between polls"
        )
    return None, ""


def _event(
    at: Any, kind: str, key: tuple[str, str], before: Any, after: Any, detail: str
) -> dict[str, Any]:
    return {
        "at": at,
        "kind": kind,
        "namespace": key[0],
        "bundle": key[1],
        "before": before,
        "after": after,
        "detail": detail,
        "source": "snapshots",
    }


def _tiles(parent: Any, children: Sequence[Any]) -> bool:
    """Whether the children ranges exactly tile the parent's range."""
    ordered = sorted(children, key=lambda c: c.lower)
    if len(ordered) < 2 or ordered[0].lower != parent.lower or ordered[-1].upper != parent.upper:
        return False
    return all(a.upper == b.lower for a, b in itertools.pairwise(ordered))


def _listing_events(
    previous: pd.DataFrame, current: pd.DataFrame, at: Any
) -> Iterator[dict[str, Any]]:
    before = set(zip(previous["namespace"], previous["bundle"], strict=True))
    after = set(zip(current["namespace"], current["bundle"], strict=True))
    # a namespace seen for the first time (or no more) is not a bundle change
    common = set(previous["namespace"]) & set(current["namespace"])
    changed = sorted({ns for ns, _ in before ^ after} & common)
    for namespace in changed:
        now = current[current["namespace"] == namespace]
        then = previous[previous["namespace"] == namespace]
        gone = [r for r in then.itertuples() if r.bundle not in set(now["bundle"])]
        new = [r for r in now.itertuples() if r.bundle not in set(then["bundle"])]
        explained: set[str] = set()
        for parent in gone:
            children = [c for c in new if parent.lower <= c.lower and c.upper <= parent.upper]
            key = (str(namespace), parent.bundle)
            if _tiles(parent, children):
                names = ", ".join(c.bundle for c in sorted(children, key=lambda c: c.lower))
                explained |= {c.bundle for c in children}
                yield _event(at, "split", key, parent.bundle, names, f"split into {names}")
            else:
                yield _event(at, "disappeared", key, _owner(parent.owner_broker), None, "")
        for child in new:
            if child.bundle not in explained:
                key = (str(namespace), child.bundle)
                yield _event(at, "appeared", key, None, _owner(child.owner_broker), "")


def bundle_kinds(stored: pd.DataFrame) -> pd.DataFrame:
    """The rows of `events` table rows `stored` of a bundle kind (`bundle_owner_changed`,
    `bundle_added`, ...), in their order and dtypes."""
    if stored.empty or "kind" not in stored:
        return stored.iloc[0:0]
    mine = stored["kind"].astype(str).str.startswith("bundle").to_numpy(dtype=bool, na_value=False)
    return stored[mine]


def with_stored_events(derived: pd.DataFrame, stored: pd.DataFrame) -> pd.DataFrame:
    """Add the collector's bundle events that no derived event already covers."""
    mine = bundle_kinds(stored)
    if mine.empty or "subject" not in mine:
        return derived
    bundle = mine["subject"].astype(str).str.rsplit("/", n=1).str[-1]
    extra = pd.DataFrame(
        {
            "at": mine["collected_at"],
            "kind": mine["kind"],
            "namespace": mine["namespace"],
            "bundle": bundle,
            "before": mine["before"],
            "after": mine["after"],
            "detail": "",
            "source": "collector",
        }
    )
    seen = set(zip(derived["at"], derived["namespace"], derived["bundle"], strict=True))
    keep = [
        (a, n, b) not in seen
        for a, n, b in zip(extra["at"], extra["namespace"], extra["bundle"], strict=True)
    ]
    merged = pd.concat([derived, extra[keep]], ignore_index=True) if any(keep) else derived
    return merged.sort_values("at", ascending=False, kind="stable").reset_index(drop=True)
