"""The sticky-key hash in Spark's JVM: `jvm/StickyKeyHash.java`, compiled into a jar and
registered with a session as the SQL function `pulsar_lens_murmur3_31`.

    python -m pulsar_lens.plugins.spark.jvm      compile (once) and print the jar's path

The jar is built from the source in this package with the JDK `lab.runtime.find_java` finds
(its `javac`), against the jars of the installed pyspark, into
`~/.cache/pulsar-lens/spark-udf/<digest>/` (the digest covers the source and the pyspark
version, so an upgrade compiles again); no jar is shipped. `scripts/setup.sh` compiles it; a
process that finds it missing compiles it on first use.

How the jar reaches the executors (`register`): a classic session started by
`plugins.spark.session` lists it in `spark.jars`, so the driver serves it to every executor
of `local[N]`, a standalone master, YARN or Kubernetes; a classic session started without it
gets it by `ADD JAR`; a Spark Connect client uploads it with `addArtifacts`, and the server
loads it for this client's session only and ships it to its executors.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pulsar_lens.core.errors import JvmHashUnavailable, LocalPulsarError
from pulsar_lens.lab.runtime import cache_root, find_java

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("jvm") / "StickyKeyHash.java"
CLASS = "pulsar_lens.spark.StickyKeyHash"
FUNCTION = "pulsar_lens_murmur3_31"
JAR_NAME = "pulsar-lens-spark.jar"
RELEASE = "17"  # the oldest Java Spark 4 runs on: executors on any supported JDK load it
COMPILE_TIMEOUT = 300.0

_lock = threading.Lock()
_registered: dict[int, Any] = {}  # id(session) -> session (held, so no id is reused)


def spark_jars() -> Path:
    """The jars of the installed pyspark (what the UDF compiles against)."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def jar_path() -> Path:
    """Where the jar of this source and this pyspark lives (whether compiled or not)."""
    import pyspark

    version = str(pyspark.__version__)
    digest = hashlib.sha256(SOURCE.read_bytes() + version.encode()).hexdigest()
    return Path(cache_root()) / "spark-udf" / digest[:16] / JAR_NAME


def find_javac() -> Path:
    """The `javac` beside the `java` the project runs (`find_java`), or JvmHashUnavailable
    saying what to install."""
    try:
        java = Path(find_java())
    except LocalPulsarError as exc:
        raise JvmHashUnavailable(
            f"no JDK to compile the Spark sticky-key hash: {exc}", tool="java"
        ) from exc
    for candidate in (java.with_name("javac"), java.resolve().with_name("javac")):
        if candidate.exists():
            return candidate
    raise JvmHashUnavailable(
        f"{java} has no javac beside it (a JRE, not a JDK): install openjdk-17-jdk-headless "
        "(scripts/setup.sh does), or compile the jar where a JDK is and set spark.jars to it",
        tool="javac",
        path=java,
    )


def compile_jar() -> Path:
    """The compiled jar, compiled now if missing; JvmHashUnavailable when it cannot be."""
    jar = jar_path()
    if jar.exists():
        return jar
    javac = find_javac()
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent, prefix=".build-") as build:
        classes = Path(build) / "classes"
        command = [str(javac), "--release", RELEASE, "-nowarn", "-d", str(classes),
                   "-cp", str(spark_jars() / "*"), str(SOURCE)]  # fmt: skip
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise JvmHashUnavailable(
                f"javac could not compile {SOURCE.name}: {exc}", tool="javac", path=SOURCE
            ) from exc
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip()[-2000:]
            raise JvmHashUnavailable(
                f"javac refused {SOURCE}:\n{said}",
                tool="javac",
                path=SOURCE,
                exit_code=done.returncode,
            )
        partial = Path(build) / JAR_NAME
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        os.replace(partial, jar)  # atomic: a concurrent reader sees no jar or a whole one
    log.info("compiled the Spark sticky-key hash into %s", jar)
    return jar


def is_connect(spark: Any) -> bool:
    """A Spark Connect client session (no JVM of ours)?"""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def register(spark: SparkSession) -> str:
    """`FUNCTION` registered with `spark` (once per session), its jar compiled if needed and
    made available where the session runs (module docstring); returns the function's name."""
    from pyspark.sql.types import IntegerType

    with _lock:
        if id(spark) in _registered:
            return FUNCTION
        jar = compile_jar()
        if is_connect(spark):
            spark.addArtifacts(str(jar))
        elif str(jar) not in _listed_jars(spark):
            spark.sql(f"ADD JAR '{jar}'")
        spark.udf.registerJavaFunction(FUNCTION, CLASS, IntegerType())
        _registered[id(spark)] = spark
    return FUNCTION


def _listed_jars(spark: Any) -> str:
    return str(spark.sparkContext.getConf().get("spark.jars", ""))


def main() -> int:
    try:
        print(compile_jar())
    except JvmHashUnavailable as exc:
        print(f"pulsar-lens: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
