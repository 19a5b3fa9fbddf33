"""A SparkSession with the Kafka connector on its classpath.

`build_session()` checks Java, resolves the connector jars (spark_jobs/jars.py, cached) and
starts Spark: 4 shuffle partitions, no UI or console progress bar, UTC session time zone, a
temporary warehouse dir, and quiet logging (WARN, through spark_jobs/log4j2.properties;
`SPARK_JOBS_LOG_LEVEL=INFO` or `log_level=` for more, e.g. the Java Kafka client's own lines).

The master: `master=` when given (the command lines' `--master`, e.g. `spark://host:7077`);
else, under `spark-submit`, the one spark-submit was given; else `local[2]`. Under
spark-submit the driver JVM is already running, so the connector jars must come with
`spark-submit --jars "$(python -m spark_jobs.jars --spark-jars)"`: without them the session
is refused with a SetupError saying so.

`stop_session()` stops the session and also ends the driver JVM that pyspark started, so a
process can start a fresh one later (pyspark on its own keeps the JVM until Python exits).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from spark_jobs.jars import SetupError, check_java, resolve_jars
from spark_jobs.kafka_util import broker_answers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG4J2_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"
DEFAULT_MASTER = "local[2]"
KAFKA_SOURCE_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
_WAREHOUSE_ATTR = "_spark_jobs_warehouse"


def under_spark_submit() -> bool:
    """Whether spark-submit started this Python driver (its JVM hands pyspark the gateway
    port; pyspark on its own launches a JVM instead)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(
    app_name: str = "kafkalite-spark-jobs",
    *,
    master: str | None = None,
    shuffle_partitions: int = 4,
    log_level: str | None = None,
    driver_memory: str = "1g",
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    check_java()
    jars = resolve_jars()
    from pyspark.sql import SparkSession

    # Spark warns when the host name resolves to a loopback address; everything is local.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    level = (log_level or os.environ.get("SPARK_JOBS_LOG_LEVEL") or "WARN").upper()
    warehouse = tempfile.mkdtemp(prefix="spark-jobs-warehouse-")
    java_options = (
        f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG} -Dkafkalite.sparkjobs.logLevel={level} "
        "-Duser.timezone=UTC"
    )
    conf = {
        "spark.jars": jars.classpath,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.warehouse.dir": warehouse,
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": driver_memory,
        "spark.driver.extraJavaOptions": java_options,
        **(extra_conf or {}),
    }
    builder = SparkSession.builder.appName(app_name)
    if master or not under_spark_submit():  # else spark-submit's --master
        builder = builder.master(master or DEFAULT_MASTER)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    setattr(spark, _WAREHOUSE_ATTR, warehouse)
    try:
        spark.sparkContext.setLogLevel(level)  # raises for an unknown level
        _check_connector(spark)
    except BaseException:
        stop_session(spark)  # not left running (with its JVM) until Python exits
        raise
    return spark


def _check_connector(spark: SparkSession) -> None:
    """The Kafka source must load in the driver: a JVM started by spark-submit without
    `--jars` does not have it (`spark.jars` set afterwards only reaches the executors)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    if not jvm.org.apache.spark.util.Utils.classIsLoadable(KAFKA_SOURCE_CLASS):
        raise SetupError(
            "the Kafka connector is not on the driver's classpath; run spark-submit with "
            '--jars "$(python -m spark_jobs.jars --spark-jars)"'
        )


def stop_session(spark: SparkSession, timeout: float = 30.0) -> None:
    """Stop the session, then the driver JVM pyspark launched (if it launched one)."""
    from pyspark import SparkContext

    try:
        spark.stop()
    finally:
        warehouse = getattr(spark, _WAREHOUSE_ATTR, None)
        if warehouse:
            shutil.rmtree(warehouse, ignore_errors=True)
        gateway = SparkContext._gateway
        proc: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
        if gateway is not None:
            with contextlib.suppress(Exception):
                gateway.shutdown()
            SparkContext._gateway = None
            SparkContext._jvm = None
        if proc is not None:
            # The gateway server exits when its stdin closes (pyspark's design for a parent
            # that goes away); SIGKILL only if it does not.
            with contextlib.suppress(Exception):
                if proc.stdin:
                    proc.stdin.close()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def add_session_arguments(parser: argparse.ArgumentParser) -> None:
    """The command lines' Spark options: --master, --conf (repeatable), --log-level."""
    parser.add_argument(
        "--master",
        type=_master_arg,
        help=f"Spark master URL, e.g. spark://HOST:7077 (default: spark-submit's, else "
        f"{DEFAULT_MASTER})",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        type=_conf_arg,
        metavar="KEY=VALUE",
        help="a Spark property, e.g. spark.executor.memory=512m (repeatable)",
    )
    parser.add_argument("--log-level", help="driver log level (default WARN)")


def _master_arg(text: str) -> str:
    """Spark's own rule (SparkSubmit), checked before a JVM starts."""
    if text != "yarn" and not text.startswith(("spark://", "k8s://", "local")):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a master is local, local[N], spark://HOST:PORT, yarn or k8s://..."
        )
    return text


def _conf_arg(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def cli_session(bootstrap: str, app_name: str, args: argparse.Namespace) -> SparkSession | None:
    """For the command lines: a session (add_session_arguments' options) once a broker
    answers at `bootstrap`; None, after one `error:` line on stderr, when none does or Spark
    cannot start (exit code 2)."""
    if not broker_answers(bootstrap):
        return None
    try:
        return build_session(
            app_name, master=args.master, log_level=args.log_level, extra_conf=dict(args.conf)
        )
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    except Exception as exc:  # e.g. a master URL Spark cannot parse or reach
        print(f"error: Spark did not start: {first_line(exc)}", file=sys.stderr)
        return None


def first_line(exc: BaseException) -> str:
    """An exception in one line (a failed Spark job's message runs to a JVM stack trace)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
