"""A Spark error is said once, by its first line: its message goes on with the query plan
(kilobytes), which stayed in every log line and in the stored failure."""

from __future__ import annotations

import io
import logging

import pandas as pd
import pytest

from pulsar_lens.api import AnalysisPlugin, Inputs, Result, View
from pulsar_lens.cli.spark_job import ProgressBar
from pulsar_lens.core.errors import PluginRunError
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.spark.jobs import JobStatus

PLAN = "'Project ['no_such_column]\n+- Relation [topic#0,msg_rate_in#1] parquet\n" * 50


class AnalysisException(Exception):
    """Stands for pyspark's: the runner knows Spark's errors by their module."""


AnalysisException.__module__ = "pyspark.errors.exceptions.captured"


class SelectsMissing(AnalysisPlugin):
    name = "selects-missing"
    title = "Selects missing"
    description = "Raises what Spark raises for an unknown column."
    version = "1"
    inputs = ()
    outputs = ("x",)

    def analyze(self, data: Inputs, params: object) -> Result:
        raise AnalysisException(
            "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column with name `no_such_column` cannot "
            "be resolved. SQLSTATE: 42703;\n" + PLAN
        )

    def render(self, result: Result) -> list[View]:
        return []


class Buggy(SelectsMissing):
    name = "buggy"

    def analyze(self, data: Inputs, params: object) -> Result:
        raise ValueError("line one\nline two")


def empty() -> Inputs:
    return Inputs(tables={}, snapshots=pd.DataFrame({"snapshot_id": ["s1"]}))


def test_a_spark_error_fails_the_plugin_with_its_first_line_and_logs_no_plan(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with pytest.raises(PluginRunError) as raised:
        runner.run_on_inputs(SelectsMissing(), empty())
    assert str(raised.value).startswith(
        "plugin 'selects-missing' failed: analyze raised AnalysisException: "
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column with name `no_such_column` cannot be "
        "resolved. SQLSTATE: 42703; (at "
    )
    origin = raised.value.origin
    assert origin is not None and "Project" not in str(raised.value)
    assert "Project" not in origin.message and "Project" not in origin.traceback
    assert "SQLSTATE: 42703;" in origin.traceback  # the traceback still says what was wrong
    assert not [r for r in caplog.records if "Project" in r.getMessage() or r.exc_info]


def test_other_errors_keep_their_whole_message_and_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with pytest.raises(PluginRunError, match="ValueError: line one\nline two"):
        runner.run_on_inputs(Buggy(), empty())
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    # with its traceback (a redacting filter of the root handlers may have formatted it already)
    assert len(errors) == 1 and (errors[0].exc_info or errors[0].exc_text), errors


def test_the_progress_bar_leaves_a_failure_to_the_line_after_it() -> None:
    stream = io.StringIO()
    job = JobStatus(id="j", plugin="p", params={}, origin="cli", state="failed", error=PLAN)
    ProgressBar(stream, "p")(job)
    assert stream.getvalue().endswith("failed\n") and "Project" not in stream.getvalue()
