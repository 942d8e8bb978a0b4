"""Leases: one writer at a time on a directory (an index, an OUTPUT), on any :class:`Storage`.

A lease is the file ``DIR/_lock``, created with :meth:`Storage.put_if_absent` (exactly one of
two racing runs creates it) and holding who took it: a random token, the host, pid and the
process's start, the command line, when. While it is held, a thread rewrites
``DIR/_lock.heartbeat.TOKEN`` every ``heartbeat_seconds``; the token in the name means an old
holder can never overwrite a newer holder's heartbeat. Release deletes both.

A run that finds the lock taken waits, polling with backoff, up to its timeout, then raises
:class:`LockTimeout` (exit 2) naming the holder. A lock is *stale*, and broken at once, when
its holder ran on this host (same host name and pid namespace) and its process is gone; any
other holder is stale when a waiter has seen its heartbeat file unchanged for ``stale_after``
seconds of the waiter's own clock (no clocks of two machines are compared). Breaking renames
``_lock`` to a unique name, which only one breaker can do, then tries to create it again.

A holder whose lease was broken (it was thought dead) learns it at :meth:`Lease.check`, which
the runs call right before they commit: it raises :class:`LeaseLost` and the run commits
nothing. docs/operations/locking.md says what each file system guarantees.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from neardup_spark.config import DEFAULT_LOCK_TIMEOUT
from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import Storage, join

log = logging.getLogger(__name__)

LOCK_FILE = "_lock"
HEARTBEAT_PREFIX = f"{LOCK_FILE}.heartbeat."
BROKEN_PREFIX = f"{LOCK_FILE}.broken."
__all__ = ["DEFAULT_LOCK_TIMEOUT", "Lease", "LeaseLost", "LockTimeout", "acquire", "hold_lease"]
HEARTBEAT_SECONDS = 10.0
STALE_AFTER_SECONDS = 120.0
_LONGEST_POLL = 5.0


class LockTimeout(UserError):
    """Another run held the lock longer than this run was told to wait (exit 2)."""


class LeaseLost(UserError):
    """This run's lock was broken by another run that took it for dead; nothing is committed."""


def is_lease_entry(name: str) -> bool:
    """The lock, its heartbeats, a broken lock and their temporary files."""
    return name == LOCK_FILE or name.startswith((f"{LOCK_FILE}.", f".{LOCK_FILE}."))


def _now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rpartition(")")[2].split()
    except OSError:
        return None


def _process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (``""`` where unknown): a pid that
    was reused by another process has another start."""
    fields = _proc_stat(pid)
    return fields[19] if fields and len(fields) > 19 else ""


_SECRET_KEY = re.compile(r"secret|passw|token|credential|key", re.IGNORECASE)


def command_line(argv: list[str]) -> str:
    """The command line for the lock file and messages, secrets masked: a lock file sits on
    shared storage, and ``--set spark.hadoop.fs.s3a.secret.key=...`` must not end up there.

    >>> command_line(["/x/neardup", "dedupe", "in", "--set", "fs.s3a.secret.key=abc"])
    'neardup dedupe in --set fs.s3a.secret.key=***'
    """
    words = [
        f"{w.partition('=')[0]}=***" if "=" in w and _SECRET_KEY.search(w.partition("=")[0]) else w
        for w in argv[1:]
    ]
    return " ".join([os.path.basename(argv[0]) if argv else "", *words])[:400]


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _boot_id() -> str:
    """This boot of this machine (Linux; ``""`` elsewhere): two machines may share a host name
    (an unset one: ``localhost``) and, outside containers, the pid namespace's id."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class Holder:
    """Who holds (or asks for) a lock: the content of ``_lock``."""

    token: str
    purpose: str
    command: str
    host: str
    pid: int
    pid_namespace: str
    pid_start: str
    started_at: str
    boot_id: str = ""  # "" in the lock files of versions before it

    @classmethod
    def this_process(cls, purpose: str) -> Holder:
        return cls(
            token=uuid.uuid4().hex,
            purpose=purpose,
            command=command_line(sys.argv),
            host=socket.gethostname(),
            pid=os.getpid(),
            pid_namespace=_pid_namespace(),
            pid_start=_process_start(os.getpid()),
            started_at=_now_iso(),
            boot_id=_boot_id(),
        )

    @classmethod
    def from_text(cls, text: str) -> Holder:
        """The holder a lock file names; an unreadable one gets a token from its text, so it
        can still be judged stale by its (absent) heartbeat."""
        try:
            data = json.loads(text)
            return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except (ValueError, TypeError, KeyError):
            digest = hashlib.sha256(text.encode()).hexdigest()[:16]
            return cls(f"unreadable-{digest}", "?", "?", "?", -1, "", "", "?")

    def to_text(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    def describe(self) -> str:
        return (
            f"{self.purpose} (pid {self.pid} on host {self.host}, since {self.started_at}: "
            f"{self.command})"
        )

    def is_gone(self) -> bool:
        """True when the holder ran on this host and its process has ended (or its pid now
        belongs to another process); False when it lives or cannot be told from here."""
        here = socket.gethostname(), _pid_namespace()
        if (self.host, self.pid_namespace) != here or self.pid <= 0:
            return False
        if self.boot_id and self.boot_id != _boot_id():  # another machine of the same name
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # alive, someone else's
        fields = _proc_stat(self.pid)
        if fields is None:
            return False  # no /proc: alive as far as we can tell
        reused = bool(self.pid_start) and self.pid_start != _process_start(self.pid)
        return fields[0] == "Z" or reused


class Lease:
    """A held lock on ``directory``: heartbeats until :meth:`release`."""

    def __init__(
        self, storage: Storage, directory: str, holder: Holder, heartbeat_seconds: float
    ) -> None:
        self.storage, self.directory, self.holder = storage, directory, holder
        self.lock_path = join(directory, LOCK_FILE)
        self.heartbeat_path = join(directory, HEARTBEAT_PREFIX + holder.token)
        self._every = heartbeat_seconds
        self._stop = threading.Event()
        self._beats = 0
        self._thread = threading.Thread(
            target=self._heartbeat, name=f"lease-heartbeat {directory}", daemon=True
        )

    def start(self) -> Lease:
        self._beat()
        self._thread.start()
        return self

    def _beat(self) -> None:
        self._beats += 1
        beat = {"token": self.holder.token, "beats": self._beats, "at": _now_iso()}
        self.storage.replace_text(self.heartbeat_path, json.dumps(beat) + "\n")

    def _heartbeat(self) -> None:
        taken = False
        while not self._stop.wait(self._every):
            try:
                # Not held at one look may be a waiter's break attempt that put the lock back
                # (_break_stale): beat again once it is; the run itself checks before it writes.
                if not self.held():
                    if not taken:
                        log.error("the lock on %s was taken over by another run", self.directory)
                    taken = True
                    continue
                taken = False
                self._beat()
            except Exception as exc:  # a storage hiccup: try again at the next beat
                log.warning("lock heartbeat on %s failed: %s", self.directory, exc)

    def held(self) -> bool:
        """Whether ``_lock`` still names this lease."""
        text = self.storage.read_text(self.lock_path)
        return text is not None and Holder.from_text(text).token == self.holder.token

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless this lease still holds the lock (before a commit)."""
        if not self.held():
            raise LeaseLost(
                f"the lock on {self.directory} was broken by another run while this one held "
                "it (its heartbeat looked stopped); nothing of this run was committed. Rerun it"
            )

    def release(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        try:
            self.storage.delete(self.heartbeat_path)
            if self.held():
                self.storage.delete(self.lock_path)
        except Exception as exc:  # a lock left behind is stale at once for the next run here
            log.warning("could not release the lock on %s: %s", self.directory, exc)


def _break_stale(storage: Storage, directory: str, holder: Holder, why: str) -> None:
    """Move a stale lock out of the way (one breaker's rename succeeds); a lock that turns out
    to be a newer holder's is put back."""
    lock, broken = join(directory, LOCK_FILE), join(directory, BROKEN_PREFIX + uuid.uuid4().hex)
    try:
        storage.rename(lock, broken)
    except OSError:
        return  # released, or broken by another waiter first
    text = storage.read_text(broken) or ""
    if Holder.from_text(text).token != holder.token:  # taken afresh between our read and rename
        storage.put_if_absent(lock, text)
    else:
        log.warning("broke the stale lock on %s of %s: %s", directory, holder.describe(), why)
        storage.delete(join(directory, HEARTBEAT_PREFIX + holder.token))
    storage.delete(broken)


def acquire(
    storage: Storage,
    directory: str,
    purpose: str,
    timeout: float = DEFAULT_LOCK_TIMEOUT,
    *,
    stale_after: float = STALE_AFTER_SECONDS,
    heartbeat_seconds: float = HEARTBEAT_SECONDS,
    on_wait: Callable[[Holder], None] | None = None,
) -> Lease:
    """Take the lock on ``directory`` for ``purpose`` (e.g. "nightly run"), waiting up to
    ``timeout`` seconds (0: not at all) for another holder, breaking a stale one. ``on_wait``
    is told of each holder this call starts waiting for (tests)."""
    me = Holder.this_process(purpose)
    lock = join(directory, LOCK_FILE)
    started = time.monotonic()
    seen: dict[str, tuple[str | None, float]] = {}  # token -> (heartbeat text, seen since)
    delay = 0.1
    while True:
        if storage.put_if_absent(lock, me.to_text()):
            return Lease(storage, directory, me, heartbeat_seconds).start()
        text = storage.read_text(lock)
        if text is None:
            continue  # released meanwhile
        holder = Holder.from_text(text)
        beat = storage.read_text(join(directory, HEARTBEAT_PREFIX + holder.token))
        now = time.monotonic()
        if holder.token not in seen or seen[holder.token][0] != beat:
            if holder.token not in seen:
                log.warning(
                    "%s is locked by %s; waiting up to %.0f s",
                    directory,
                    holder.describe(),
                    timeout,
                )
                if on_wait is not None:
                    on_wait(holder)
            seen[holder.token] = (beat, now)
        if holder.is_gone():
            _break_stale(storage, directory, holder, "its process on this host is gone")
            continue
        if now - seen[holder.token][1] >= stale_after:
            _break_stale(storage, directory, holder, f"no heartbeat for {stale_after:.0f} s")
            continue
        if now - started >= timeout:
            raise LockTimeout(
                f"{directory} is locked by another run: {holder.describe()}; gave up after "
                f"{timeout:.0f} s (--lock-timeout). Nothing was changed. Run again once it "
                f"has finished; a lock whose holder died is taken over automatically"
            )
        time.sleep(max(0.0, min(delay, started + timeout - now, stale_after)))
        delay = min(delay * 2, _LONGEST_POLL)


@contextmanager
def hold_lease(
    storage: Storage, directory: str, purpose: str, timeout: float = DEFAULT_LOCK_TIMEOUT
) -> Iterator[Lease]:
    """The lock on ``directory`` for the ``with`` block (see :func:`acquire`)."""
    lease = acquire(storage, directory, purpose, timeout)
    try:
        yield lease
    finally:
        lease.release()
