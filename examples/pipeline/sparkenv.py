"""A small local SparkSession with Spark's Kafka connector, for the example pipeline.

The connector (``spark-sql-kafka-0-10`` of the same version as the installed pyspark, plus
kafka-clients, commons-pool2 and spark-token-provider-kafka) is not part of pyspark. It is
resolved from Maven Central by ``compat/spark/pom.xml`` into ``compat/spark/jars/``, either by
``./scripts/test`` or by hand::

    cd compat/spark && mvn -B -q dependency:copy-dependencies -DoutputDirectory=jars \\
        -DincludeScope=runtime

and handed to Spark as local files (``spark.jars``), so Spark itself needs no network access.
Set ``PYDMQ_SPARK_JARS`` to another folder of jars to use those instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_JARS_DIR = REPO_ROOT / "compat" / "spark" / "jars"
CONNECTOR_PREFIX = "spark-sql-kafka-0-10_"

RESOLVE_HINT = (
    "Resolve them with `./scripts/test --collect-only` (installs the test dependencies too), or "
    "with Maven alone:\n"
    "    (cd compat/spark && mvn -B -q dependency:copy-dependencies "
    "-DoutputDirectory=jars -DincludeScope=runtime)\n"
    "or point PYDMQ_SPARK_JARS at a folder holding spark-sql-kafka-0-10 and its dependencies."
)


class SetupError(RuntimeError):
    """Something the pipeline needs is missing; the message says how to get it."""


def jars_dir() -> Path:
    return Path(os.environ.get("PYDMQ_SPARK_JARS") or DEFAULT_JARS_DIR)


def connector_jars() -> list[str]:
    """The connector jars, checked against the installed pyspark version."""
    try:
        import pyspark
    except ImportError as exc:
        raise SetupError(
            "pyspark is not installed: `pip install -e '.[test]'` (or ./scripts/test) "
            "installs the pinned version"
        ) from exc
    folder = jars_dir()
    jars = sorted(folder.glob("*.jar"))
    connectors = [j for j in jars if j.name.startswith(CONNECTOR_PREFIX)]
    if not connectors:
        raise SetupError(f"Spark's Kafka connector jars are missing from {folder}.\n{RESOLVE_HINT}")
    # spark-sql-kafka-0-10_2.13-4.2.0.jar -> 4.2.0
    version = connectors[0].stem.rsplit("-", 1)[-1]
    if version != pyspark.__version__:
        raise SetupError(
            f"{connectors[0].name} does not match the installed pyspark {pyspark.__version__}; "
            f"re-resolve the jars.\n{RESOLVE_HINT}"
        )
    return [str(j) for j in jars]


def spark_session(work_dir: Path, app_name: str = "pydmq-example-pipeline") -> Any:
    """A local[2] session with the connector; scratch files go under ``work_dir``."""
    jars = connector_jars()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    scratch = work_dir / "spark-local"
    scratch.mkdir(parents=True, exist_ok=True)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.jars", ",".join(jars))
        .config("spark.driver.memory", "1g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        # Two shuffle partitions: the state store of the windowed aggregation is small.
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.warehouse.dir", str(work_dir / "spark-warehouse"))
        .config("spark.local.dir", str(scratch))
        .config(
            "spark.driver.extraJavaOptions",
            f"-Djava.io.tmpdir={scratch} -Dderby.system.home={work_dir / 'derby'}",
        )
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark


def stop_spark(spark: Any) -> None:
    """Stop the session and the JVM that pyspark started for it.

    Without this the JVM lives until the Python process exits, and Spark's cached Kafka
    producers keep reconnecting to a broker that may already be gone.
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
