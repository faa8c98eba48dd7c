"""The real `pulsar-admin` (`org.apache.pulsar.admin.cli.PulsarAdminTool`, from the
`pulsar-client-tools` artifact), run from its jars against a local broker: what a support
engineer's dump is made with, so the import is proven on the tool's own output.

Its jars are resolved from Maven Central with Maven into their own folder beside the broker's
(`~/.cache/pulsar-lens/pulsar-<version>/admin-tool`; Maven's downloads stay in `~/.m2`), of the
`admin_tool` release that `runtime.RELEASES` names for the broker's. Each JVM start costs
seconds, so `run_batch` runs many commands in one JVM (`pulsar_runtime/AdminBatch.java`).
"""

from __future__ import annotations

import logging
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from pulsar_lens.core.errors import LocalPulsarError
from pulsar_lens.lab.runtime import (
    PULSAR_VERSION,
    RUNTIME_DIR,
    cache_root,
    find_java,
    maven_copy,
    once,
    release,
)

log = logging.getLogger(__name__)
TOOL_CLASS = "org.apache.pulsar.admin.cli.PulsarAdminTool"
BATCH = RUNTIME_DIR / "AdminBatch.java"
MAX_SECONDS = 600.0  # one JVM, however many commands: a busy machine takes minutes


def admin_tool_dir(version: str = PULSAR_VERSION) -> Path:
    return cache_root() / f"pulsar-{release(version).version}" / "admin-tool"


def ensure_admin_tool(version: str = PULSAR_VERSION) -> Path:
    """Resolve the admin tool's jars for broker release `version` into the cache, once;
    return their folder. LocalPulsarError when that release names no admin tool."""
    chosen = release(version)
    if chosen.admin_tool is None:
        raise LocalPulsarError(
            f"the lab has no pulsar-admin for Pulsar {chosen.version} (Maven Central serves "
            "no pulsar-client-tools close to it)",
            process="pulsar-admin",
        )
    target = admin_tool_dir(version)
    tool = chosen.admin_tool

    def assemble() -> str:
        maven_copy(
            RUNTIME_DIR / "admin-pom.xml",
            target,
            version=tool,
            binding=chosen.slf4j_binding,
            what=f"pulsar-admin {tool}",
        )
        return tool

    once(target.parent / ".admin-tool-complete", target.parent / ".admin-tool-lock", assemble)
    return target


def client_conf(folder: Path, admin_url: str) -> Path:
    """A client.conf that points the tool at the broker's web service (`webServiceUrl`)."""
    conf = folder / "client.conf"
    conf.write_text(f"webServiceUrl={admin_url}\nbrokerServiceUrl=pulsar://127.0.0.1:6650\n")
    return conf


def run_batch(
    admin_url: str,
    commands: Mapping[Path, Sequence[str]],
    *,
    version: str = PULSAR_VERSION,
    timeout: float = MAX_SECONDS,
) -> None:
    """Run each `pulsar-admin` command (its arguments, without the `pulsar-admin`) against
    the broker at `admin_url`, all in one JVM, its standard output into its own file (the
    key). LocalPulsarError naming the commands that failed, with the tool's last words."""
    lib = ensure_admin_tool(version)
    with tempfile.TemporaryDirectory(prefix="pulsar-admin-") as scratch:
        folder = Path(scratch)
        lines = []
        for output, args in commands.items():
            if any("\t" in a or "\n" in a for a in (str(output), *args)):
                raise ValueError(f"a tab or newline in the command for {output}")
            lines.append("\t".join((str(output), *args)))
        listing = folder / "commands.tsv"
        listing.write_text("\n".join(lines) + "\n", encoding="utf-8")
        cmd = [
            find_java(version),
            "-Dfile.encoding=UTF-8",
            "-cp",
            f"{lib}/*",
            str(BATCH),
            str(client_conf(folder, admin_url)),
            str(listing),
        ]
        log.info("running %d pulsar-admin command(s) against %s", len(lines), admin_url)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise LocalPulsarError(
            f"pulsar-admin failed against {admin_url}:\n{tail}",
            process="pulsar-admin",
            exit_code=done.returncode,
        )


def run(admin_url: str, *args: str, version: str = PULSAR_VERSION) -> str:
    """What one `pulsar-admin ARGS...` prints against the broker at `admin_url`."""
    with tempfile.TemporaryDirectory(prefix="pulsar-admin-out-") as scratch:
        output = Path(scratch) / "out"
        run_batch(admin_url, {output: args}, version=version)
        return output.read_text(encoding="utf-8")
