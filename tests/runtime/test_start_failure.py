"""A session that does not start: the checks made before the JVM is launched
(runtime/preflight.py) and the reading of what the JVM said when it failed
(runtime/start_failure.py), on the messages Spark 4.0 printed here. No Spark session: the
real processes are in tests/cli/test_start_failures.py."""

from __future__ import annotations

import os
import socket
import zipfile
from pathlib import Path

import pytest

from neardup_spark.errors import MachineError, UserError
from neardup_spark.runtime import preflight
from neardup_spark.runtime.start_failure import exception_messages, explain


class Gateway(Exception):
    """An exception whose text is the given one (PySpark's, py4j's)."""


GATEWAY_EXITED = Gateway(
    "[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number."
)


def py4j(text: str) -> Gateway:
    return Gateway(
        f"An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n{text}"
    )


def explained(exc: BaseException, output: str = "", settings=None, master="local[*]"):
    return explain(exc, output.splitlines(), settings or {}, master)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("4g", None),
        ("4G", None),
        (" 512mb ", None),
        ("1024", None),
        ("1p", None),
        ("abc", "not a size"),
        ("", "not a size"),
        ("-1", "not a size"),
        ("1.5g", "fractional sizes are not supported"),
        ("4gib", "unknown unit 'gib'"),
        ("99999999999999999999", "too large"),
    ],
)
def test_sizes_follow_spark_byte_string_rule(value, problem):
    assert preflight.size_problem(value) == problem


def test_a_negative_size_only_where_spark_takes_one():
    preflight.check_sizes({"spark.sql.autoBroadcastJoinThreshold": "-1"}, launching=True)
    with pytest.raises(UserError, match=r"spark\.executor\.memory=-1"):
        preflight.check_sizes({"spark.executor.memory": "-1"}, launching=True)


@pytest.mark.parametrize("value", ["abc", "2gb", "512", "1.5g", "4 g"])
def test_a_driver_memory_the_jvm_refuses_is_a_user_error_naming_it(value):
    with pytest.raises(UserError, match=rf"^spark\.driver\.memory={value}: "):
        preflight.check_sizes({"spark.driver.memory": value}, launching=True)


def test_settings_that_are_not_sizes_are_left_to_spark():
    preflight.check_sizes({"spark.sql.shuffle.partitions": "abc", "spark.app.name": "x"}, True)
    # spark-submit's JVM has its heap already: only Spark's own rule applies
    preflight.check_sizes({"spark.driver.memory": "2gb"}, launching=False)


def test_java_is_found_as_spark_class_finds_it(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(MachineError, match=r"JAVA_HOME=.*nowhere holds no Java"):
        preflight.find_java("Java 17 or later")
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        MachineError, match=r"^no Java: JAVA_HOME is not set and no java is on PATH"
    ):
        preflight.find_java("Java 17 or later")
    java = fake_java(tmp_path / "jdk", 'openjdk version "11.0.2" 2019-01-15')
    monkeypatch.setenv("PATH", str(java.parent))
    assert preflight.find_java("Java") == (java, "PATH")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert preflight.find_java("Java") == (java, "JAVA_HOME")


def fake_java(home: Path, says: str, code: int = 0) -> Path:
    """A ``java`` script that prints ``says`` on stderr, as ``java -version`` does."""
    java = home / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho '{says}' >&2\nexit {code}\n")
    java.chmod(0o755)
    return java


@pytest.mark.parametrize(
    ("says", "version"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('Picked up JAVA_TOOL_OPTIONS: -Xss4m\nopenjdk version "21-ea" 2023-09-19', 21),
    ],
)
def test_the_java_version_is_what_java_version_prints(tmp_path, says, version):
    assert preflight.java_version(fake_java(tmp_path, says)) == version


def test_the_release_file_of_an_installation_spares_running_java(tmp_path):
    java = fake_java(tmp_path, "no version here", code=1)
    (tmp_path / "release").write_text('IMPLEMENTOR="x"\nJAVA_VERSION="11.0.24"\n')
    assert preflight.java_version(java) == 11


def test_a_java_that_does_not_run_is_a_machine_error(tmp_path):
    with pytest.raises(MachineError, match=r"-version failed \(Error: no JVM\)"):
        preflight.java_version(fake_java(tmp_path, "Error: no JVM", code=1))


def test_the_java_spark_needs_is_read_from_its_launcher(tmp_path):
    jars = tmp_path / "jars"
    jars.mkdir()
    header = b"\xca\xfe\xba\xbe\x00\x00\x00\x34"  # class file version 52: Java 8
    with zipfile.ZipFile(jars / "spark-launcher_2.12-3.5.6.jar", "w") as jar:
        jar.writestr("org/apache/spark/launcher/Main.class", header + b"rest")
    assert preflight.spark_launcher(tmp_path) == (8, "3.5.6")
    installed = preflight.spark_home()
    need, version = preflight.spark_launcher(installed)
    import pyspark

    assert version == pyspark.__version__
    assert need == (17 if pyspark.__version__.startswith("4") else 8)


def test_a_spark_home_without_spark_is_a_machine_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    with pytest.raises(MachineError, match="is not a Spark installation"):
        preflight.spark_home()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_master_nobody_answers_is_a_machine_error():
    port = closed_port()
    with pytest.raises(MachineError, match=rf"master at spark://127.0.0.1:{port} does not answer"):
        preflight.check_master(f"spark://127.0.0.1:{port}")
    with socket.socket() as listening:  # one of a standby's addresses answers: fine
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        live = listening.getsockname()[1]
        preflight.check_master(f"spark://127.0.0.1:{port},127.0.0.1:{live}")
    preflight.check_master("local[2]")
    preflight.check_master("yarn")


def test_master_urls():
    assert preflight.master_addresses("spark://a:1,b") == [("a", 1), ("b", 7077)]
    assert preflight.master_addresses("k8s://h:6443") == [("h", 6443)]
    assert preflight.master_addresses("k8s://http://h") == [("h", 80)]
    with pytest.raises(UserError, match="not a master URL"):
        preflight.master_addresses("spark://h:port")
    with pytest.raises(UserError, match="not a master Spark knows"):
        preflight.check_master_url("foo://bar")


# What Spark 4.0.1 printed, shortened to the lines read.
SQL_SETTING = (
    "Error while instantiating 'org.apache.spark.sql.internal.SessionStateBuilder':\n\n"
    "JVM stacktrace:\n"
    "java.lang.IllegalArgumentException: Error while instantiating "
    "'org.apache.spark.sql.internal.SessionStateBuilder':\n"
    "\tat org.apache.spark.sql.classic.SparkSession$.instantiateSessionState(SparkSession.scala)\n"
    "Caused by: java.lang.IllegalArgumentException: spark.sql.shuffle.partitions should be int, "
    "but was abc\n"
    "\tat org.apache.spark.internal.config.ConfigHelpers$.toNumber(ConfigBuilder.scala:40)\n"
    "\t... 18 more"
)
BYTE_STRING = (
    ": java.lang.NumberFormatException: Size must be specified as bytes (b), kibibytes (k), "
    "mebibytes (m), gibibytes (g), tebibytes (t), or pebibytes(p). E.g. 50b, 100k, or 250m.\n"
    "Failed to parse byte string: zz\n"
    "\tat org.apache.spark.network.util.JavaUtils.byteStringAs(JavaUtils.java:335)"
)
SUBMIT = (
    'Exception in thread "main" org.apache.spark.SparkException: Executor cores must be a '
    "positive number\n"
    "\tat org.apache.spark.deploy.SparkSubmitArguments.error(SparkSubmitArguments.scala:654)"
)
UI_BOUND = (
    "26/12/07 13:11:33 ERROR SparkUI: Failed to bind SparkUI\n"
    "java.net.BindException: Failed to bind to /127.0.0.1:45555: Service 'SparkUI' failed after "
    "0 retries (starting from 45555)! Consider explicitly setting the appropriate port for the "
    "service 'SparkUI' (for example spark.ui.port for SparkUI) to an available port or "
    "increasing spark.port.maxRetries.\n"
    "\tat org.sparkproject.jetty.server.Server.doStart(Server.java:375)"
)
MASTER_GONE = (
    "26/12/07 13:12:57 ERROR StandaloneSchedulerBackend: Application has been killed. Reason: "
    "All masters are unresponsive! Giving up."
)
TOO_OLD = (
    "Error: A JNI error has occurred\n"
    'Exception in thread "main" java.lang.UnsupportedClassVersionError: '
    "org/apache/spark/launcher/Main has been compiled by a more recent version of the Java "
    "Runtime (class file version 61.0)"
)


def test_exception_lines_are_read_deepest_cause_first():
    assert exception_messages(SQL_SETTING.splitlines())[0] == (
        "java.lang.IllegalArgumentException",
        "spark.sql.shuffle.partitions should be int, but was abc",
    )
    assert exception_messages(BYTE_STRING.splitlines())[0][1].endswith(
        "Failed to parse byte string: zz"
    )


def test_a_setting_spark_refuses_is_a_user_error_naming_it():
    error = explained(Gateway(SQL_SETTING), settings={"spark.sql.shuffle.partitions": "abc"})
    assert isinstance(error, UserError)
    assert str(error) == (
        "Spark refused the setting spark.sql.shuffle.partitions=abc: IllegalArgumentException: "
        "spark.sql.shuffle.partitions should be int, but was abc"
    )
    by_value = explained(py4j(BYTE_STRING), settings={"spark.a": "1", "spark.io.size": "zz"})
    assert isinstance(by_value, UserError) and "spark.io.size=zz" in str(by_value)
    words = explained(GATEWAY_EXITED, SUBMIT, {"spark.executor.cores": "abc"})
    assert isinstance(words, UserError)
    assert str(words).startswith("Spark refused the setting spark.executor.cores=abc: ")
    missing = explained(
        py4j(": java.lang.ClassNotFoundException: org.foo.Nope"),
        settings={"spark.serializer": "org.foo.Nope"},
    )
    assert str(missing) == (
        "Spark refused the setting spark.serializer=org.foo.Nope: ClassNotFoundException: "
        "org.foo.Nope"
    )


def test_a_port_in_use_is_a_machine_error_naming_its_setting():
    error = explained(
        Gateway("Answer from Java side is empty"), UI_BOUND, {"spark.port.maxRetries": "0"}
    )
    assert isinstance(error, MachineError)
    assert str(error).startswith(
        "Spark cannot bind SparkUI to port 45555 (Address already in use): free the port, or "
        "choose another with --set spark.ui.port=PORT"
    )


def test_an_address_not_of_this_machine_blames_the_setting_that_gave_it():
    said = (
        "java.net.BindException: Cannot assign requested address: Service 'sparkDriver' failed "
        "after 16 retries (on a random free port)! Consider explicitly setting the appropriate "
        "binding address for the service 'sparkDriver' (for example spark.driver.bindAddress "
        "for SparkDriver) to the correct binding address."
    )
    given = explained(py4j(": " + said), settings={"spark.driver.bindAddress": "10.9.9.9"})
    assert isinstance(given, UserError)
    assert str(given) == (
        "Spark cannot bind sparkDriver to spark.driver.bindAddress=10.9.9.9: not an address of "
        "this machine"
    )
    resolved = explained(py4j(": " + said))
    assert isinstance(resolved, MachineError) and "SPARK_LOCAL_IP" in str(resolved)


def test_a_master_that_never_takes_the_application_is_a_machine_error():
    stopped = py4j(
        ": java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext."
    )
    error = explained(stopped, MASTER_GONE, master="spark://h:7077")
    assert isinstance(error, MachineError)
    assert str(error).startswith("the Spark master at spark://h:7077 did not take the application")


@pytest.mark.parametrize(
    ("output", "settings", "kind", "start"),
    [
        (
            "Invalid maximum heap size: -Xmxabc\nError: Could not create the Java Virtual Machine.",
            {"spark.driver.memory": "abc"},
            UserError,
            "Spark's JVM did not start with spark.driver.memory=abc: Invalid maximum heap size",
        ),
        (
            "Unrecognized VM option 'Foo'\nError: Could not create the Java Virtual Machine.",
            {},
            MachineError,
            "the JVM did not start: Unrecognized VM option 'Foo'",
        ),
        (
            "Error occurred during initialization of VM\n"
            "Could not reserve enough space for 8388608KB object heap",
            {"spark.driver.memory": "8g"},
            MachineError,
            "the JVM could not get the memory for spark.driver.memory=8g",
        ),
        (
            TOO_OLD,
            {},
            MachineError,
            "the Java found is older than Spark's classes need",
        ),
        (
            "something nobody foresaw",
            {},
            MachineError,
            "Spark did not start: something nobody foresaw",
        ),
        (
            "Error occurred during initialization of VM\njava.lang.Error: Properties init: no cwd",
            {},
            MachineError,
            "the JVM did not start: Error occurred during initialization of VM: java.lang.Error",
        ),
        (
            "Error occurred during initialization of VM\nToo small maximum heap",
            {"spark.driver.memory": "512"},
            UserError,
            "Spark's JVM did not start with spark.driver.memory=512: Too small maximum heap",
        ),
        ("", {}, MachineError, "Spark did not start: its JVM exited as it started, saying nothing"),
    ],
)
def test_a_jvm_that_does_not_start_says_why(output, settings, kind, start):
    error = explained(GATEWAY_EXITED, output, settings)
    assert isinstance(error, kind)
    assert str(error).startswith(start), str(error)
    assert "\n" not in str(error)


def test_an_unknown_start_failure_is_never_a_retryable_job_failure():
    error = explained(RuntimeError("boom"))
    assert isinstance(error, MachineError) and str(error) == "Spark did not start: boom"


def test_no_java_stack_frames_in_a_message():
    error = explained(Gateway(SQL_SETTING + "\n" + "\n".join(["\tat x.y(Z.java:1)"] * 50)))
    assert "\tat " not in str(error) and len(str(error)) < 400
    assert os.linesep not in str(error)
