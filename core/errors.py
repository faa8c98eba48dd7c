"""The exception tree of Pulsar Lens.

    DashboardError
      CollectorError
        AdminApiError(method, path, status, body excerpt)
        AdminApiUnreachable(method, path, reason)
      LocalPulsarError        the local standalone could not be assembled or started
      SettingsError           a PULSAR_* setting or a command-line value is malformed or missing
        MutationsDisabled     an action would change the cluster and mutations are not enabled
      SnapshotError           unreadable or incompatible stored snapshot
      ModelError              an assignment model refused an input (e.g. a sticky range conflict)
      PluginError
        PluginLoadError(source)
        PluginContractError(plugin)
        PluginRunError(plugin)
        PluginParamsError(plugin)  parameters that the plugin's Params model rejects
        PluginUnavailable(plugin)
        ResultNotReady(plugin)     a Spark analysis with no stored result yet (a job makes it)

Messages say what failed, where, and what to do. They never contain credentials: the admin
API errors pass what they quote from the network through `core.secrets.clean`, the plugin
errors what they quote from plugins through `pulsar_lens.core.secrets.redact`.
"""

from __future__ import annotations

from pulsar_lens.core.secrets import clean, redact

BODY_EXCERPT = 300


class DashboardError(Exception):
    """Base class of every error this product raises on purpose."""


class CollectorError(DashboardError):
    """Talking to a Pulsar cluster failed."""


class AdminApiError(CollectorError):
    """The admin REST API answered with an error status or an unreadable body."""

    def __init__(
        self, method: str, path: str, status: int | None, body: str, hint: str = ""
    ) -> None:
        self.method = method
        self.path = clean(path)
        self.status = status
        self.body = clean(body, limit=BODY_EXCERPT)
        self.hint = clean(hint)
        where = f"{method} {self.path}"
        what = f"returned {status}" if status is not None else "returned an unreadable body"
        text = f"{where} {what}"
        if self.body:
            text += f": {self.body}"
        if self.hint:
            text += f"; {self.hint}"
        super().__init__(text)


class AdminApiUnreachable(CollectorError):
    """The admin REST API could not be reached (connection refused, DNS, timeout)."""

    def __init__(self, method: str, path: str, reason: str) -> None:
        self.method = method
        self.path = clean(path)
        self.reason = clean(reason)
        super().__init__(f"{method} {self.path} could not reach the admin API: {self.reason}")


class LocalPulsarError(DashboardError):
    """The local Pulsar standalone could not be assembled, started or stopped."""


class SettingsError(DashboardError):
    """A setting (environment variable or command-line value) is malformed or missing."""


class MutationsDisabled(SettingsError):
    """An action would change the cluster, and PULSAR_LENS_ALLOW_MUTATIONS is not set."""


class SnapshotError(DashboardError):
    """A stored snapshot is unreadable or incompatible."""


class ModelError(DashboardError):
    """An assignment model refused an input, as the broker would."""


class PluginError(DashboardError):
    """Base class of plugin failures. Their messages quote plugins, which are someone else's
    code: every known secret is redacted from them, whoever prints or stores them."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class PluginLoadError(PluginError):
    """A plugin could not be imported or failed validation."""

    def __init__(self, source: str, message: str, plugin: str | None = None) -> None:
        self.source = redact(source)
        self.plugin = plugin
        self.message = redact(message)
        name = f"plugin {plugin!r} " if plugin else "plugin "
        super().__init__(f"{name}from {source}: {message}")


class PluginContractError(PluginError):
    """A plugin broke its declared contract at run time (e.g. wrong outputs)."""

    def __init__(self, plugin: str, message: str) -> None:
        self.plugin = plugin
        super().__init__(f"plugin {plugin!r}: {message}")


class PluginRunError(PluginError):
    """A plugin raised while analysing."""

    def __init__(self, plugin: str, message: str) -> None:
        self.plugin = plugin
        super().__init__(f"plugin {plugin!r} failed: {message}")


class PluginParamsError(PluginError):
    """Parameters given to a plugin do not validate against its `Params` model."""

    def __init__(self, plugin: str, message: str) -> None:
        self.plugin = plugin
        super().__init__(f"plugin {plugin!r}: invalid parameters: {message}")


class PluginUnavailable(PluginError):
    """A plugin cannot run here (e.g. its engine is not installed)."""

    def __init__(self, plugin: str, message: str) -> None:
        self.plugin = plugin
        super().__init__(f"plugin {plugin!r} is unavailable: {message}")


class ResultNotReady(PluginError):
    """A Spark analysis has no stored result for these params yet: a job computes it."""

    def __init__(self, plugin: str, message: str) -> None:
        self.plugin = plugin
        super().__init__(f"{plugin}: {message}")
