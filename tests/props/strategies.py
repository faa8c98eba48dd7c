"""Hypothesis strategies: admin API answers mutated from the recorded ones, and bad values.

Every answer starts as one recorded from a real broker (`tests/data/admin_api/`, Pulsar 4.0.7
and 3.0.7) and is then damaged the way a broken, older, newer or hostile
admin API could damage it: fields missing, of the wrong type, null, out of range (2**63, 1e308,
NaN as a number and as text, negative counts), unknown fields added, names made of control
characters or lone surrogates (what a JSON `\\ud800` escape decodes to), containers emptied.
Everything generated is something `json.loads` can return.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

from pulsar_lens.core.errors import AdminApiError

DATA = Path(__file__).resolve().parents[1] / "data" / "admin_api"
SCENARIOS = ("default", "classic-modular", "3.0-default", "3.0-autosplit-modular")
BASE = "http://127.0.0.1:8080"

# repeatable in CI: the same examples every run, no example database
PROPS = settings(derandomize=True, database=None, deadline=None, print_blob=False)


def props(examples: int) -> settings:
    """The shared settings with this many generated examples (explicit ones come on top)."""
    return settings(PROPS, max_examples=examples)


Path_ = tuple[str | int, ...]


# ---- the recorded answers ------------------------------------------------------------------


def _strip_notes(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_notes(v) for k, v in value.items() if k != "_note"}
    if isinstance(value, list):
        return [_strip_notes(v) for v in value]
    return value


def index(scenario: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads((DATA / scenario / "index.json").read_text())
    return [e for e in entries if e["by"] == "poll"]


def recorded_body(scenario: str, entry: Mapping[str, Any]) -> Any:
    """The decoded body of one recorded answer (None for an empty one, e.g. 204)."""
    if not entry["file"]:
        return None
    text = (DATA / scenario / entry["file"]).read_text()
    return json.loads(text) if entry["file"].endswith(".json") else text


def recorded(pattern: str) -> list[Any]:
    """Every recorded JSON answer whose file name matches `pattern`, of every recorded
    release, in a fixed order."""
    found = []
    for folder in sorted(DATA.iterdir()):
        if folder.is_dir():
            for path in sorted(folder.glob(pattern)):
                found.append(_strip_notes(json.loads(path.read_text())))
    return found


TOPIC_STATS = recorded("*_stats*.json")
BULK_STATS = recorded("*broker-stats_topics.json")
BUNDLES = recorded("*_bundles.json")
OWNED = recorded("*_ownedNamespaces.json")
LOAD_REPORTS = recorded("*load-report.json")
LEADERS = recorded("*leaderBroker.json")


# ---- shapes ----------------------------------------------------------------------------------


def as_3_0(stats: Any) -> Any:
    """A 4.0 topic stats answer in the shape of a broker without PIP-379 (3.0's): hash ranges
    as `"[a, b]"` strings, no draining fields, and the joining position under its other name,
    `lastSentPositionWhenJoining` (3.0.7 says `readPositionWhenJoining`; the collector reads
    both)."""
    if isinstance(stats, list):
        return [as_3_0(v) for v in stats]
    if not isinstance(stats, dict):
        return stats
    out: dict[str, Any] = {}
    for key, value in stats.items():
        if key.startswith("drainingHashes"):
            continue
        if key == "keyHashRangeArrays" and isinstance(value, list):
            out["keyHashRanges"] = [
                f"[{r[0]}, {r[1]}]" for r in value if isinstance(r, list) and len(r) == 2
            ]
        elif key == "readPositionWhenJoining":
            out["lastSentPositionWhenJoining"] = value
        else:
            out[key] = as_3_0(value)
    return out


# ---- bad values --------------------------------------------------------------------------------

HUGE_NUMBERS = (
    2**63,
    2**63 - 1,
    -(2**63) - 1,
    2**64,
    10**30,
    -1,
    -(2**31),
    2**31,
    1e308,
    -1e308,
    1e18,
    1e-300,
    math.inf,
    -math.inf,
    math.nan,
    -0.0,
    0.5,
    0,
)
NUMBER_TEXTS = ("NaN", "Infinity", "-Infinity", "1e308", "-1", "9223372036854775808", "0x10", "")
NAME_SAMPLES = (
    "",
    " ",
    "\x00",
    "\ud800",
    "a\udfffb",
    "\u202e\u200b",
    "\t\n\r",
    "../..",
    "a/b",
    "x-partition-1",
    "persistent://",
    "%2F",
    "x" * 300,
)

weird_chars = st.characters(categories=["Cs", "Cc", "Cf", "Co", "Zs", "Lu", "Ll", "Nd", "So"])
weird_names = st.sampled_from(NAME_SAMPLES) | st.text(weird_chars, max_size=12)
bad_numbers = st.sampled_from(HUGE_NUMBERS) | st.integers() | st.floats()
bad_scalars = (
    st.none()
    | st.booleans()
    | bad_numbers
    | st.sampled_from(NUMBER_TEXTS)
    | weird_names
    | st.datetimes().map(lambda d: d.isoformat())
)
bad_values = st.recursive(
    bad_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(weird_names, inner, max_size=3),
    max_leaves=6,
)


# ---- mutations ---------------------------------------------------------------------------------


def _paths(value: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*prefix, i))


def _get(value: Any, path: Path_) -> Any:
    for step in path:
        value = value[step]
    return value


def _set(root: Any, path: Path_, new: Any) -> Any:
    if not path:
        return new
    _get(root, path[:-1])[path[-1]] = new
    return root


MUTATIONS = ("replace", "delete", "add", "rename", "empty", "duplicate", "retype")


@st.composite
def mutated(draw: st.DrawFn, payload: Any, *, max_mutations: int = 4) -> Any:
    """`payload` with 1 to `max_mutations` damages at random places of its tree."""
    value = copy.deepcopy(payload)
    for _ in range(draw(st.integers(1, max_mutations))):
        path = draw(st.sampled_from(list(_paths(value))))
        node = _get(value, path)
        parent = _get(value, path[:-1]) if path else None
        kind = draw(st.sampled_from(MUTATIONS))
        if kind == "replace":
            value = _set(value, path, draw(bad_values))
        elif kind == "delete" and parent is not None:
            del parent[path[-1]]
        elif kind == "add" and isinstance(node, dict):
            node[draw(weird_names)] = draw(bad_values)
        elif kind == "rename" and isinstance(parent, dict):
            parent[draw(weird_names)] = parent.pop(path[-1])
        elif kind == "empty":
            value = _set(value, path, draw(st.sampled_from(({}, [], "", None))))
        elif kind == "duplicate" and isinstance(node, list) and node:
            node.append(copy.deepcopy(node[draw(st.integers(0, len(node) - 1))]))
        elif kind == "retype":  # a number as text, an object as a list, and back
            value = _set(value, path, _retyped(node))
    return value


def _retyped(node: Any) -> Any:
    if isinstance(node, bool):
        return str(node).lower()
    if isinstance(node, int | float):
        return str(node)
    if isinstance(node, dict):
        return list(node.values())
    if isinstance(node, list):
        return {str(i): v for i, v in enumerate(node)}
    return [node]


def stats_shapes(payloads: list[Any]) -> st.SearchStrategy[Any]:
    """A recorded stats answer, in its own shape or the 3.0 one, then mutated."""
    base = st.sampled_from(payloads)
    shaped = st.one_of(base, base.map(as_3_0))
    return shaped.flatmap(lambda p: mutated(p))


@st.composite
def damaged_polls(draw: st.DrawFn) -> tuple[str, bool, dict[str, Any]]:
    """(scenario, 3.0 shape, {path: damaged body}) for 1 to 4 of a recorded poll's answers."""
    scenario = draw(st.sampled_from(SCENARIOS))
    entries = {e["path"]: e for e in index(scenario)}
    chosen = draw(st.lists(st.sampled_from(sorted(entries)), min_size=1, max_size=4, unique=True))
    old_shape = draw(st.booleans())
    damage = {}
    for path in chosen:
        body = recorded_body(scenario, entries[path])
        if old_shape and path.endswith("/stats"):
            body = as_3_0(body)
        damage[path] = draw(mutated(body))
    return scenario, old_shape, damage


def damaged_admin(scenario: str, old_shape: bool, damage: Mapping[str, Any]) -> FakeAdmin:
    """A recording answering as `damage` says for the paths it names."""

    def change(path: str, body: Any) -> Any:
        if path in damage:
            return damage[path]
        return as_3_0(body) if old_shape and path.endswith("/stats") else body

    client = FakeAdmin.recorded(scenario, change)
    known = {path for path, _query in client.bodies}
    client.bodies.update({(path, ""): body for path, body in damage.items() if path not in known})
    return client


# ---- a fake admin API serving (mutated) recorded answers ---------------------------------------


@dataclass
class FakeAdmin:
    """What `poll()` needs of an AdminClient, answering from a recording.

    `bodies` maps (path, query) to a decoded body; a path it lacks answers 404, as a broker
    answers for a topic it does not know."""

    bodies: dict[tuple[str, str], Any]
    base_url: str = BASE
    deadline: float | None = None
    requests_made: int = 0
    trusted: list[str] = field(default_factory=list)

    @classmethod
    def recorded(
        cls, scenario: str, change: Callable[[str, Any], Any] = lambda _path, body: body
    ) -> FakeAdmin:
        bodies = {}
        for entry in index(scenario):
            bodies[(entry["path"], entry["query"])] = change(
                entry["path"], recorded_body(scenario, entry)
            )
        return cls(bodies)

    def trust_brokers(self, web_urls: Any) -> None:
        self.trusted.extend(web_urls)

    def _answer(self, path: str, params: Mapping[str, str] | None) -> Any:
        self.requests_made += 1
        query = "&".join(f"{k}={v}" for k, v in (params or {}).items())
        if (path, query) not in self.bodies:
            raise AdminApiError("GET", path, 404, '{"reason":"Topic not found"}')
        return copy.deepcopy(self.bodies[(path, query)])

    def get_json(
        self,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        decode: Any = None,
    ) -> Any:
        body = self._answer(path, params)  # decoded already
        # a bulk answer is built into its part as the poll's decoder would build its bytes
        return decode.payload(body) if hasattr(decode, "payload") else body

    def get_text(
        self,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
    ) -> str:
        body = self._answer(path, params)
        return body if isinstance(body, str) else json.dumps(body)
