"""A poll's bulk answers built into their parts on a Spark cluster's executors.

Each broker's `broker-stats/topics` answer is independent of the others' and is most of a
poll's CPU (some 150 s at 1,000,000 topics, more than two cores can give in a 30 s interval).
`SparkParts.build` is a `collectors.bulkparts.PartBuilder`: the collect process fetches the
answer as before (its credentials never leave it) and hands the body to Spark as one row of
a DataFrame; an executor's Python worker runs `part_of_answer` on it (`mapInArrow`) and sends
the part back pickled (its Arrow tables and what the parsers noted). The answers of a poll
are built at the same time, one Spark job each, on as many executors as the cluster gives.

The parts are those the collect process would build itself (`tests/spark/test_spark_parts.py`
compares them table for table, on `local[2]`, a standalone master and Spark Connect). The
executors need the Python environment docs/spark.md describes, as for `applyInPandas`.
A part's index does not come ahead of its rows (`early` is never told): the poll reads it
from the part, as it does without a pool. An answer under `min_bytes` (4 MiB, some 2,500
topics, as for the worker processes) is built in the collect process: a Spark job costs more
than building it.

Several sources of one collect process (a settings file's `[[clusters]]`) each have their
own `SparkParts` over the one process session; the session stops when the last of them that
used it closes, and only if one of them started it.
"""

from __future__ import annotations

import io
import pickle
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pulsar_lens.collectors.bulkparts import (
    POOL_MIN_BYTES,
    BrokerPart,
    IndexSink,
    NotAnObject,
    part_of_answer,
)
from pulsar_lens.core.errors import CollectorError
from pulsar_lens.core.secrets import clean

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

INPUT_SCHEMA = pa.schema(
    [
        pa.field("broker", pa.string()),
        pa.field("body", pa.binary()),
        pa.field("namespaces", pa.list_(pa.string())),  # null: every namespace
    ]
)
PART_SCHEMA = "outcome string, detail string, part binary"

BUILT, NOT_JSON, NOT_OBJECT, FAILED = "built", "not-json", "not-an-object", "failed"

# What the pickle of a part may name, nothing else: an executor is trusted to run this
# package's code, not to run any code in the collect process, which holds the admin token.
# (A schema of the parts that needs more fails their tests in tests/spark/test_spark_parts.py.)
PART_GLOBALS = frozenset(
    {
        ("pulsar_lens.collectors.bulkparts", "BrokerPart"),
        ("pulsar_lens.collectors.bulkparts", "Noted"),
        ("pulsar_lens.collectors.fields", "WarningLines"),
        ("pulsar_lens.collectors.notes", "Notes"),
        ("pulsar_lens.collectors.notes", "_Tally"),
        *(
            ("pyarrow.lib", name)
            for name in (
                "_reconstruct_table",
                "_restore_array",
                "chunked_array",
                "field",
                "list_",
                "py_buffer",
                "schema",
                "struct",
                "timestamp",
                "type_for_alias",
            )
        ),
    }
)

# the `SparkParts` using the process's session now, and whether one of them started it
_users_lock = threading.Lock()
_users = 0
_started_by_us = False


class SparkParts:
    """Builds each answer's part in a Spark job, on the session `session()` gives (by
    default the process's, `plugins.spark.session`, as configured, started at the first
    build; its JVM and the Python workers it starts never hold the admin token). An answer
    under `min_bytes` is built here."""

    def __init__(
        self,
        session: Callable[[], SparkSession] | None = None,
        *,
        min_bytes: int = POOL_MIN_BYTES,
    ) -> None:
        self._session = session
        self.min_bytes = min_bytes
        self._spark: SparkSession | None = None
        self._lock = threading.Lock()

    def _started(self) -> SparkSession:
        global _users, _started_by_us
        with self._lock:
            if self._spark is None:
                if self._session is not None:
                    self._spark = self._session()
                    return self._spark
                from pulsar_lens.plugins.spark import session

                with _users_lock:
                    fresh = session.started() is None
                    self._spark = session.get()
                    _users += 1
                    _started_by_us = _started_by_us or fresh
            return self._spark

    def close(self) -> None:
        """Stop the process's session when this is the last `SparkParts` using it and one of
        them started it (one that ran before is someone else's to stop)."""
        global _users, _started_by_us
        with self._lock:
            used, self._spark = self._session is None and self._spark is not None, None
        if not used:
            return
        with _users_lock:
            _users -= 1
            last = _users == 0 and _started_by_us
            if last:
                _started_by_us = False
                from pulsar_lens.plugins.spark import session

                session.stop()

    def build(
        self,
        body: bytes,
        broker: str,
        namespaces: frozenset[str] | None,
        early: IndexSink | None = None,
        /,
    ) -> BrokerPart | NotAnObject:
        """`part_of_answer` on an executor: ValueError when the body is not JSON,
        CollectorError when the job fails (the executor's reason with it). A body under
        `min_bytes` here, `early` told its index."""
        if len(body) < self.min_bytes:
            return part_of_answer(body, broker, namespaces, early)
        del early  # the index comes with the part
        listed = None if namespaces is None else sorted(namespaces)
        given = pa.table(
            [pa.array([broker]), pa.array([body], pa.binary()), pa.array([listed])],
            schema=INPUT_SCHEMA,
        )
        try:
            spark = self._started()  # a master that cannot be reached says so here
            rows = (
                spark.createDataFrame(given).mapInArrow(_parts, PART_SCHEMA).toArrow().to_pylist()
            )
        except Exception as exc:  # Py4J's, Connect's or PySpark's own: the job did not end
            raise CollectorError(
                f"the broker-stats answer of {broker} could not be read on Spark: "
                f"{_first_line(exc)}"
            ) from exc
        if len(rows) != 1:
            raise CollectorError(
                f"the broker-stats answer of {broker} came back from Spark as {len(rows)} parts"
            )
        outcome, detail, part = rows[0]["outcome"], rows[0]["detail"], rows[0]["part"]
        if outcome == BUILT:
            try:
                built = _PartUnpickler(io.BytesIO(part)).load()
            except Exception as exc:  # refused, or not a pickle at all
                raise CollectorError(
                    f"the part of {broker} that Spark sent back was refused: "
                    f"{clean(exc, limit=500)}"
                ) from None
            if not isinstance(built, BrokerPart):
                raise CollectorError(f"Spark returned a {type(built).__name__} for {broker}")
            return built
        if outcome == NOT_OBJECT:
            return NotAnObject(detail)
        if outcome == NOT_JSON:
            raise ValueError(detail)
        raise CollectorError(
            f"the broker-stats answer of {broker} could not be read: {clean(detail, limit=500)}"
        )


class _PartUnpickler(pickle.Unpickler):
    """Reads a part's pickle, refusing any name but those of `PART_GLOBALS`."""

    def find_class(self, module: str, name: str, /) -> Any:
        if (module, name) not in PART_GLOBALS:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which no part holds")
        return super().find_class(module, name)


def _parts(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """On an executor: each row's part, as (outcome, detail, pickled part)."""
    for batch in batches:
        outcomes, details, parts = [], [], []
        for row in batch.to_pylist():
            outcome, detail, part = _built(row["body"], row["broker"], row["namespaces"])
            outcomes.append(outcome)
            details.append(detail)
            parts.append(part)
        yield pa.record_batch(
            [
                pa.array(outcomes, pa.string()),
                pa.array(details, pa.string()),
                pa.array(parts, pa.binary()),
            ],
            names=["outcome", "detail", "part"],
        )


def _built(body: bytes, broker: str, namespaces: list[str] | None) -> tuple[str, str, Any]:
    polled = None if namespaces is None else frozenset(namespaces)
    try:
        found = part_of_answer(body, broker, polled)
    except ValueError as exc:  # not JSON, said as the collect process would say it
        return NOT_JSON, str(exc), None
    except Exception as exc:  # a bug of ours on the executor: said, never a hung poll
        return FAILED, f"{type(exc).__name__}: {exc}", None
    if isinstance(found, NotAnObject):
        return NOT_OBJECT, found.shown, None
    return BUILT, "", pickle.dumps(found, protocol=pickle.HIGHEST_PROTOCOL)


def _first_line(exc: BaseException) -> str:
    """The first line of what Spark said (a Py4J or Connect error goes on for pages), with
    every known secret redacted."""
    text = str(exc).strip().splitlines()
    return clean(text[0], limit=500) if text else type(exc).__name__
