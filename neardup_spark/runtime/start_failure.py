"""A Spark session that failed to start, said in one line with the right exit code.

What :mod:`~neardup_spark.runtime.preflight` cannot check before the launch, only the JVM can
reject: a setting it refuses as its context or SQL session starts (``spark.sql.shuffle.
partitions=abc``, a serializer class that does not exist), a port already bound, a master that
answers TCP but never registers the application, a JVM that does not start at all (its error
is all PySpark's ``JAVA_GATEWAY_EXITED`` leaves; the JVM's own output, captured by
:mod:`~neardup_spark.runtime.console`, says why). :func:`explain` reads the exception and that
output and returns the error to raise instead:

* :class:`UserError` (exit 2, fix the command) when a setting is to blame, named with its value
  when the user gave it;
* :class:`MachineError` (exit 3, fix the machine) otherwise: a port, a master, memory, Java, or
  a failure nothing here recognises (a start that failed once fails again: not exit 1).

Pure text work, tested without Spark (``tests/runtime/test_start_failure.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from neardup_spark.errors import MachineError, UserError

_MAX_REASON = 300

# A Java exception's line as a stack trace, py4j or PySpark print it.
_EXCEPTION = re.compile(
    r"^(?:Exception in thread \"[^\"]*\" |Caused by: |: )?"
    r"(?P<cls>(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error))(?::\s*(?P<msg>.*))?$"
)
_FRAME = re.compile(r"^\s*(?:at |\.\.\. \d+ more)")
_LOG_PREFIX = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d \w+ [\w.$]+: ")

# Spark's services, as its bind errors name them, and the setting giving each one's port.
_SERVICE_PORTS = {
    "sparkDriver": "spark.driver.port",
    "SparkUI": "spark.ui.port",
    "NettyBlockTransferService": "spark.blockManager.port",
}
_BIND = re.compile(r"BindException|Address already in use|Cannot assign requested address")
_SERVICE = re.compile(r"Service '(?:[\w.]+\.)?(?P<name>\w+)' failed after \d+ retries")
_PORT = re.compile(r"starting from (?P<port>\d+)|/[\d.:\[\]a-fA-F]+:(?P<bound>\d+)")
_MASTER_GONE = re.compile(
    r"All masters are unresponsive|Failed to connect to master|Master removed our application"
    r"|Can only call getServletHandlers on a running MetricsSystem"
)
_JAVA_TOO_NEW = re.compile(r"getSubject is supported only if a security manager is allowed")
_JAVA_TOO_OLD = re.compile(r"UnsupportedClassVersionError|has been compiled by a more recent")
_NO_MEMORY = re.compile(
    r"Could not reserve enough space|insufficient memory for the Java Runtime"
    r"|Cannot allocate memory|os::commit_memory"
)
# The JVM refusing its own options (-Xmx from spark.driver.memory, extraJavaOptions): what it
# says of the option, else its general words (with the line after them).
_JVM_OPTIONS = re.compile(
    r"Invalid (?:maximum|initial) heap size|Too small (?:maximum|initial) heap"
    r"|Unrecognized VM option|Unrecognized option|Improperly specified VM option"
    r"|Initial heap size set to a larger value|Not allowed to specify max heap"
)
_JVM_DID_NOT_START = re.compile(
    r"Error occurred during initialization of VM|Could not create the Java Virtual Machine"
)
# Settings that choose the address Spark binds to (else the host name's address is used).
_ADDRESS_KEYS = ("spark.driver.bindAddress", "spark.driver.host")
_JVM_KEYS = (
    "spark.driver.memory",
    "spark.driver.extraJavaOptions",
    "spark.driver.defaultJavaOptions",
)
_BAD_MASTER = re.compile(r"Could not parse Master URL|Master must either be yarn or start with")
# spark-submit's own checks, which name a setting in words.
_SUBMIT_WORDS = {
    "Driver memory": "spark.driver.memory",
    "Driver cores": "spark.driver.cores",
    "Executor memory": "spark.executor.memory",
    "Executor cores": "spark.executor.cores",
    "Total executor cores": "spark.cores.max",
    "Number of executors": "spark.executor.instances",
}
_SETTING = re.compile(r"\bspark\.[A-Za-z][\w.-]*[A-Za-z0-9]")
_NOT_A_VALUE = frozenset({"true", "false"})


def explain(
    exc: BaseException,
    output: Sequence[str],
    settings: Mapping[str, str],
    master: str | None,
) -> UserError | MachineError:
    """The error to raise for ``exc``, raised while a session started, given what the JVM
    wrote meanwhile (``output``), the Spark ``settings`` the user gave and the ``master``."""
    lines = [*output, *chain_lines(exc)]  # the JVM's own words first
    text = "\n".join(lines)
    causes = exception_messages(lines)
    for rule in (_machine_problem, _jvm_options_problem):
        found = rule(text, causes, settings, master)
        if found is not None:
            return found
    if _BAD_MASTER.search(text):
        return UserError(f"--master {master}: {_reason(causes, _BAD_MASTER) or 'not a master URL'}")
    blamed = _blamed_setting(causes, settings)
    if blamed is not None:
        key, reason = blamed
        shown = f"{key}={settings[key]}" if key in settings else key
        return UserError(f"Spark refused the setting {shown}: {reason}")
    return MachineError(f"Spark did not start: {_root_cause(causes, lines, exc)}")


def chain_lines(exc: BaseException) -> list[str]:
    """The lines of ``exc`` and of the exceptions it was raised from or during."""
    lines: list[str] = []
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            break
        lines += str(seen).splitlines()
        seen = seen.__cause__ or seen.__context__
    return lines


def exception_messages(lines: Iterable[str]) -> list[tuple[str, str]]:
    """(class, message) of each Java exception in ``lines``: the causes (``Caused by:``) first,
    the deepest first, then the others in order; a message's continuation lines (up to the
    stack frames) are joined to it."""
    found: list[tuple[bool, str, list[str]]] = []  # (a cause, class, message lines)
    current: list[str] | None = None
    for raw in lines:
        line = _LOG_PREFIX.sub("", raw.strip())
        match = _EXCEPTION.match(line)
        if match is not None:
            current = [match["msg"] or ""]
            found.append((line.startswith("Caused by:"), match["cls"], current))
        elif current is not None and line and not _FRAME.match(line) and len(current) < 4:
            current.append(line)
        else:
            current = None
    causes = [item for item in reversed(found) if item[0]]
    ordered = causes + [item for item in found if not item[0]]
    return [(cls, " ".join(part for part in parts if part)) for _, cls, parts in ordered]


def _machine_problem(
    text: str, causes: list[tuple[str, str]], settings: Mapping[str, str], master: str | None
) -> UserError | MachineError | None:
    if _BIND.search(text):
        return _bind_problem(text, settings)
    if _MASTER_GONE.search(text):
        return MachineError(
            f"the Spark master at {master} did not take the application (all masters "
            "unresponsive): is it running, is this its address, and does it run this Spark's "
            "version?"
        )
    if _JAVA_TOO_NEW.search(text):
        return MachineError(
            "the Java found is newer than the installed Spark supports (it removed the "
            "security calls Hadoop makes): install a Java release this Spark lists as "
            "supported and point JAVA_HOME at it"
        )
    if _JAVA_TOO_OLD.search(text):
        return MachineError(
            f"the Java found is older than Spark's classes need: {_reason(causes, _JAVA_TOO_OLD)}"
        )
    if _NO_MEMORY.search(text):
        asked = settings.get("spark.driver.memory")
        size = f" for spark.driver.memory={asked}" if asked else ""
        return MachineError(
            f"the JVM could not get the memory{size} ({_first_match(text, _NO_MEMORY)}): free "
            "memory on this machine or ask for less (--set spark.driver.memory=...)"
        )
    return None


def _bind_problem(text: str, settings: Mapping[str, str]) -> UserError | MachineError:
    service = _SERVICE.search(text)
    name = service["name"] if service else "a service"
    if "Cannot assign requested address" in text:  # not an address of this machine
        given = [f"{key}={settings[key]}" for key in _ADDRESS_KEYS if key in settings]
        if given:
            return UserError(
                f"Spark cannot bind {name} to {given[0]}: not an address of this machine"
            )
        return MachineError(
            f"Spark cannot bind {name}: this machine's host name does not resolve to one of "
            "its addresses (set SPARK_LOCAL_IP, or --set spark.driver.bindAddress=ADDRESS)"
        )
    key = _SERVICE_PORTS.get(name)
    port = _PORT.search(text)
    number = (port["port"] or port["bound"]) if port else None
    where = f"port {number}" if number and number != "0" else "its port"
    choose = f"choose another with --set {key}=PORT" if key else "choose other ports"
    return MachineError(
        f"Spark cannot bind {name} to {where} (Address already in use): free the port, or "
        f"{choose}, or let Spark try the next ports (spark.port.maxRetries, now "
        f"{settings.get('spark.port.maxRetries', '16')})"
    )


def _jvm_options_problem(
    text: str, causes: list[tuple[str, str]], settings: Mapping[str, str], master: str | None
) -> UserError | MachineError | None:
    said = _first_match(text, _JVM_OPTIONS) or _first_match(text, _JVM_DID_NOT_START, then=True)
    if said is None:
        return None
    given = [key for key in _JVM_KEYS if key in settings]
    if not given:
        return MachineError(
            f"the JVM did not start: {said} (JAVA_TOOL_OPTIONS, _JAVA_OPTIONS or Spark's "
            "configuration files?)"
        )
    key = given[0] if "heap" in said.lower() or len(given) == 1 else given[-1]
    return UserError(f"Spark's JVM did not start with {key}={settings[key]}: {said}")


def _first_match(text: str, pattern: re.Pattern[str], then: bool = False) -> str | None:
    """The line of ``text`` where ``pattern`` is found, without a log line's prefix (``then``:
    and the line after it, which says more)."""
    lines = [_LOG_PREFIX.sub("", line.strip()) for line in text.splitlines()]
    for number, line in enumerate(lines):
        if pattern.search(line):
            after = lines[number + 1] if then and number + 1 < len(lines) else ""
            said = f"{line.rstrip('.')}: {after}" if after else line
            return said[:_MAX_REASON]
    return None


def _reason(causes: list[tuple[str, str]], pattern: re.Pattern[str]) -> str | None:
    for cls, msg in causes:
        if pattern.search(f"{cls}: {msg}"):
            return _shown(cls, msg)
    return None


def _shown(cls: str, msg: str) -> str:
    """``IllegalArgumentException: ...``: the class without its package, and the message."""
    name = cls.rsplit(".", 1)[-1]
    return f"{name}: {msg}"[:_MAX_REASON] if msg else name


def _blamed_setting(
    causes: list[tuple[str, str]], settings: Mapping[str, str]
) -> tuple[str, str] | None:
    """(setting, reason) when an exception names a setting (by its key, spark-submit's words
    for it, or the value the user gave it)."""
    by_length = sorted(settings, key=len, reverse=True)
    for cls, msg in causes:
        text = f"{cls}: {msg}"
        for key in by_length:
            if key in text:
                return key, _shown(cls, msg)
        for words, key in _SUBMIT_WORDS.items():
            if msg.startswith(words):
                return key, _shown(cls, msg)
        for key in by_length:
            if _holds_value(msg, settings[key]):
                return key, _shown(cls, msg)
        named = _SETTING.search(msg)
        if named is not None:
            return named.group(0), _shown(cls, msg)
    return None


def _holds_value(message: str, value: str) -> bool:
    value = value.strip()
    if len(value) < 2 or value.lower() in _NOT_A_VALUE:
        return False
    return re.search(rf"(?<![\w.\-]){re.escape(value)}(?![\w\-]|\.\w)", message) is not None


def _root_cause(causes: list[tuple[str, str]], lines: list[str], exc: BaseException) -> str:
    """The line that best says why: the deepest Java cause, else the JVM's last words, else
    the exception's first line."""
    if causes:
        return _shown(*causes[0])
    said = [
        _LOG_PREFIX.sub("", line.strip())
        for line in lines
        if line.strip() and not _FRAME.match(line) and "JAVA_GATEWAY_EXITED" not in line
    ]
    if said:
        return said[0][:_MAX_REASON]
    if "JAVA_GATEWAY_EXITED" in str(exc):
        return "its JVM exited as it started, saying nothing (-v shows Spark's console)"
    return f"{type(exc).__name__}: {str(exc).strip()}"[:_MAX_REASON]
