"""The exception tree of Pulsar Lens.

    PulsarLensError             every error raised on purpose; `origin`: the exception beneath
      CollectorError(setting, url)
        AdminApiError(method, path, status, body excerpt, hint; endpoint, detail)
        AdminApiUnreachable(method, path, reason; endpoint, detail)
        OAuth2Error (collectors.oauth2)
        ProbeStartError (collectors.probe)
                              the probe's client could not subscribe or create its producer
      LocalPulsarError(process, pid, port, log_path, exit_code)
                              the local standalone or cluster could not be assembled or started
      JvmHashUnavailable(tool, path, exit_code)
                              the sticky-key hash for Spark's JVM could not be compiled (no JDK)
      SettingsError(setting | file, line, key; problem, rule; problems)
                              a PULSAR_* setting, a settings file key or a command-line value is
                              malformed or missing
        MutationsDisabled     an action would change the cluster and mutations are not enabled
      DumpRefused(path, reason)
                              a file of a dump of admin answers (`pulsar-lens import`) that
                              cannot be read: the snapshot it belongs to is not imported
      SnapshotError(path, table, snapshot_id)
                              unreadable or incompatible stored snapshot, or an unusable store
      ModelError(model, field, value)
                              an assignment model refused an input (e.g. a sticky range conflict)
      PluginError(plugin, detail, phase, limit, origin)
        PluginLoadError(source)
        PluginContractError
        PluginRunError(analysed_at)
        PluginParamsError          parameters that the plugin's Params model rejects
        PluginUnavailable
        ResultNotReady             a Spark analysis with no stored result yet (a job makes it)

    RuleBroken(ValueError)      a value breaks a rule of its setting; str() is the rule as
                                said after the setting's name ("must be at least 1m, got 30s")

What an error is about travels in its fields (`exc.plugin`, `exc.phase`, `exc.limit`,
`exc.path`, ...): code that needs to know reads them, never the message. `str(exc)` is the
one line a person reads; it says what failed, where, and what to do.

`origin` is the exception a plugin raised, as text (`Origin`, kept in `core.origin`): its
type, message, the file and line in the plugin's own code, and its traceback. It is text
because plugins fail in other processes (the plugin worker, the Spark job worker) and their
failures are stored; the CLI (`-v`) and the plugin's page show the traceback to the plugin's
author.

Errors never contain credentials: the admin API errors pass what they quote from the network
through `core.secrets.clean`, the plugin errors everything they quote from plugins, origin and
traceback included, through `pulsar_lens.core.secrets.redact`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulsar_lens.core.origin import MESSAGE_LIMIT as MESSAGE_LIMIT
from pulsar_lens.core.origin import TRACEBACK_LIMIT as TRACEBACK_LIMIT
from pulsar_lens.core.origin import Origin as Origin
from pulsar_lens.core.origin import origin_of as origin_of
from pulsar_lens.core.secrets import clean, redact

BODY_EXCERPT = 300


class PulsarLensError(Exception):
    """Base class of every error this product raises on purpose."""

    origin: Origin | None = None


class CollectorError(PulsarLensError):
    """Talking to a Pulsar cluster failed; `setting` names the setting to fix when one is to
    blame (e.g. PULSAR_ADMIN_TOKEN_FILE), `url` the address that failed when known (shown
    without credentials)."""

    def __init__(
        self, message: str = "", *, setting: str | None = None, url: str | None = None
    ) -> None:
        super().__init__(message)
        self.setting = setting
        self.url = None if url is None else clean(url)


class _AdminCallError(CollectorError):
    """An admin REST call that failed: `method` and `path` name it, `detail` says how."""

    method: str
    path: str

    @property
    def endpoint(self) -> str:
        """The call, as `EndpointError.endpoint` names it: `GET /admin/v2/...`."""
        return f"{self.method} {self.path}"


class AdminApiError(_AdminCallError):
    """The admin REST API answered with an error status or an unreadable body."""

    def __init__(
        self, method: str, path: str, status: int | None, body: str, hint: str = ""
    ) -> None:
        self.method = method
        self.path = clean(path)
        self.status = status
        self.body = clean(body, limit=BODY_EXCERPT)
        self.hint = clean(hint)
        super().__init__(f"{self.endpoint} {self.detail}")

    @property
    def detail(self) -> str:
        """What went wrong, from the fields: `str(exc)` without the call in front."""
        what = (
            f"returned {self.status}" if self.status is not None else "returned an unreadable body"
        )
        if self.body:
            what += f": {self.body}"
        return f"{what}; {self.hint}" if self.hint else what


class AdminApiUnreachable(_AdminCallError):
    """The admin REST API could not be reached (connection refused, DNS, timeout)."""

    status: int | None = None  # no answer, so no status: as `AdminApiError.status` reads

    def __init__(self, method: str, path: str, reason: str) -> None:
        self.method = method
        self.path = clean(path)
        self.reason = clean(reason)
        super().__init__(f"{self.endpoint} {self.detail}")

    @property
    def detail(self) -> str:
        """What went wrong, from the fields: `str(exc)` without the call in front."""
        return f"could not reach the admin API: {self.reason}"


class LocalPulsarError(PulsarLensError):
    """The local Pulsar standalone could not be assembled, started or stopped: `process` names
    the process at fault ("broker-0", "zookeeper", "java", "mvn", ...), `pid` and `port` it when
    known, `log_path` is the log to read, `exit_code` how it ended."""

    def __init__(
        self,
        message: str = "",
        *,
        process: str | None = None,
        pid: int | None = None,
        port: int | None = None,
        log_path: str | os.PathLike[str] | None = None,
        exit_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.process = process
        self.pid = pid
        self.port = port
        self.log_path = None if log_path is None else Path(log_path)
        self.exit_code = exit_code


class RuleBroken(ValueError):
    """A value breaks a rule of its setting. `str()` is the rule as a predicate, said right
    after the setting's name: "must be at least 1m, got 30s" reads "PULSAR_LENS_RETENTION must
    be at least 1m, got 30s". A plain ValueError of a setting's validator is a sentence of its
    own instead ("'x' is not a duration; ..."), said after the name and a colon.

    A ValueError, so pydantic validators raise it and pydantic keeps it (in the error's
    `ctx["error"]`): the settings file's reader sets `SettingProblem.rule` from its type."""


@dataclass(frozen=True, slots=True)
class SettingProblem:
    """One malformed or missing setting: the environment variable or command-line option
    (`setting`), or where a settings file set it (`file`, `line`, `key`, e.g.
    `clusters[1].admin_url`), and what is wrong with its value (`problem`). `rule` says that
    `problem` is a broken rule (`RuleBroken`), read right after where the value was set
    ("PULSAR_LENS_RETENTION must be ..."); else `problem` follows a colon."""

    problem: str
    setting: str | None = None
    file: str | None = None
    line: int | None = None
    key: str | None = None
    rule: bool = False


class JvmHashUnavailable(PulsarLensError):
    """The sticky-key hash Spark runs in its JVM could not be compiled: no JDK (javac), or
    javac refused the source; the message says which and what to install. `tool` is the
    program at fault ("java", "javac"), `path` the file concerned, `exit_code` javac's."""

    def __init__(
        self,
        message: str = "",
        *,
        tool: str | None = None,
        path: str | os.PathLike[str] | None = None,
        exit_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.tool, self.exit_code = tool, exit_code
        self.path = None if path is None else Path(path)


class SparkUnavailable(PulsarLensError):
    """The Spark master the settings name cannot be reached (a Spark Connect server that
    refuses the connection); the message names it, without its token, and what to do."""


class SettingsError(PulsarLensError):
    """A setting (environment variable, settings file key or command-line value) is malformed
    or missing. `setting`, `file`, `line`, `key` and `problem` are those of the first problem
    (see `SettingProblem`; None when the raiser knew none); `problems` lists every one found.
    `rule` marks `problem` as a broken rule when the raiser gives no `problems`."""

    def __init__(
        self,
        message: str = "",
        *,
        setting: str | None = None,
        file: str | os.PathLike[str] | None = None,
        line: int | None = None,
        key: str | None = None,
        problem: str | None = None,
        rule: bool = False,
        problems: Sequence[SettingProblem] = (),
    ) -> None:
        super().__init__(message)
        if not problems and (setting or file or key or problem is not None):
            at = None if file is None else os.fspath(file)
            said = message if problem is None else problem
            problems = (SettingProblem(said, setting, at, line, key, rule),)
        self.problems: tuple[SettingProblem, ...] = tuple(problems)
        one = self.problems[0] if self.problems else SettingProblem("")
        self.setting, self.file, self.line, self.key = one.setting, one.file, one.line, one.key
        self.problem = one.problem if self.problems else None


class MutationsDisabled(SettingsError):
    """An action would change the cluster, and PULSAR_LENS_ALLOW_MUTATIONS is not set."""


class DumpRefused(PulsarLensError):
    """A dump of admin answers that cannot be imported: `path` names the file (or capture
    folder) to blame, `reason` says why; nothing of that capture is stored."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class SnapshotError(PulsarLensError):
    """A stored snapshot is unreadable or incompatible, or the store cannot be used: `path` is
    the store's root or the file at fault, `table` and `snapshot_id` what was being read or
    written when known."""

    def __init__(
        self,
        message: str = "",
        *,
        path: str | os.PathLike[str] | None = None,
        table: str | None = None,
        snapshot_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = None if path is None else Path(path)
        self.table = table
        self.snapshot_id = snapshot_id


class ModelError(PulsarLensError):
    """An assignment model refused an input, as the broker would: `model` names the model
    ("bundles", "sticky", "auto-split", "consistent-hashing", "partition-key", "consumers"),
    `field` the input or option it refused (e.g. "boundaries", "numBundles", "--consumers"),
    `value` the value refused, as text, when short enough to quote."""

    def __init__(
        self,
        message: str = "",
        *,
        model: str | None = None,
        field: str | None = None,
        value: str | None = None,
    ) -> None:
        super().__init__(message)
        self.model = model
        self.field = field
        self.value = value


class PluginError(PulsarLensError):
    """Base class of plugin failures: `plugin` (its slug, None before one is known), `phase`
    (import, params, analyze, render, param_choices, metrics, ...), `detail` (what went wrong,
    without the plugin's name), `limit` (the setting whose limit stopped it) and `origin` (what
    the plugin raised).

    Plugins are someone else's code: every known secret is redacted from what these errors
    quote of them, whoever prints or stores them.
    """

    def __init__(
        self,
        plugin: str | None,
        detail: str,
        *,
        phase: str | None = None,
        limit: str | None = None,
        origin: Origin | None = None,
    ) -> None:
        self.plugin = plugin
        self.detail = redact(detail)
        self.phase = phase
        self.limit = limit
        self.origin = origin.redacted() if origin is not None else None
        super().__init__(redact(self.headline()))

    def headline(self) -> str:
        """The one line `str()` gives, from the fields."""
        return f"plugin {self.plugin!r}: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        """The fields, for a stored failure."""
        return {
            "kind": type(self).__name__,
            "plugin": self.plugin,
            "phase": self.phase,
            "detail": self.detail,
            "limit": self.limit,
            "origin": self.origin.to_json() if self.origin is not None else None,
        }


class PluginLoadError(PluginError):
    """A plugin could not be imported or failed validation: `source` says where from; `file`
    and `line` where its author looks: where the import failed (`origin`'s), else where the
    refused class is defined, when known."""

    def __init__(
        self,
        source: str,
        message: str,
        plugin: str | None = None,
        *,
        origin: Origin | None = None,
        file: str | None = None,
        line: int | None = None,
    ) -> None:
        self.source = redact(source)
        self.message = redact(message)
        super().__init__(plugin, message, phase="import", origin=origin)
        if file is None and self.origin is not None:
            file, line = self.origin.file, self.origin.line
        self.file = None if file is None else redact(file)
        self.line = line

    @property
    def where(self) -> str:
        """`file:line`, or '' when not known."""
        if self.file is None:
            return ""
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def headline(self) -> str:
        name = f"plugin {self.plugin!r} " if self.plugin else "plugin "
        return f"{name}from {self.source}: {self.detail}"


class PluginContractError(PluginError):
    """A plugin broke its declared contract at run time (e.g. wrong outputs)."""


class PluginRunError(PluginError):
    """A plugin failed while analysing (or rendering, ...); `analysed_at` is set when the
    failure was stored when the snapshot was analysed, and is read now."""

    def __init__(
        self,
        plugin: str,
        detail: str,
        *,
        phase: str | None = None,
        limit: str | None = None,
        origin: Origin | None = None,
        analysed_at: str | None = None,
    ) -> None:
        self.analysed_at = analysed_at
        super().__init__(plugin, detail, phase=phase, limit=limit, origin=origin)

    def headline(self) -> str:
        when = ""
        if self.analysed_at is not None:
            at = f" at {self.analysed_at}" if self.analysed_at else ""
            when = f" (when this snapshot was analysed{at})"
        return f"plugin {self.plugin!r} failed: {self.detail}{when}"

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any], *, analysed_at: str | None = None
    ) -> PluginRunError:
        """A stored failure (`PluginError.to_json`) read again, as the failure of a run."""
        origin = data.get("origin")
        return cls(
            str(data.get("plugin") or ""),
            str(data.get("detail") or ""),
            phase=data.get("phase"),
            limit=data.get("limit"),
            origin=Origin.from_json(origin) if isinstance(origin, Mapping) else None,
            analysed_at=analysed_at,
        )


class PluginParamsError(PluginError):
    """Parameters given to a plugin do not validate against its `Params` model."""

    def __init__(self, plugin: str, detail: str, *, origin: Origin | None = None) -> None:
        super().__init__(plugin, detail, phase="params", origin=origin)

    def headline(self) -> str:
        return f"plugin {self.plugin!r}: invalid parameters: {self.detail}"


class PluginUnavailable(PluginError):
    """A plugin cannot run here (e.g. its engine is not installed)."""

    def headline(self) -> str:
        return f"plugin {self.plugin!r} is unavailable: {self.detail}"


class ResultNotReady(PluginError):
    """A Spark analysis has no stored result for these params yet: a job computes it."""

    def headline(self) -> str:
        return f"{self.plugin}: {self.detail}"
