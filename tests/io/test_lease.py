"""Create-exclusive writes and leases on local paths, with real processes and real signals (no
Spark): one winner among racing writers, waiting, timeouts naming the holder, stale locks of
dead and silent holders, a lease broken under its holder."""

from __future__ import annotations

import doctest
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from neardup_spark.io import lease as lease_module
from neardup_spark.io.filesystem import LocalStorage
from neardup_spark.io.lease import (
    HEARTBEAT_PREFIX,
    LOCK_FILE,
    Holder,
    LeaseLost,
    LockTimeout,
    acquire,
    is_lease_entry,
)

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 60.0


def wait_for(condition, what: str, seconds: float = DEADLINE) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


RACER = """
import sys, time
from pathlib import Path
from neardup_spark.io import lease as lease_module
from neardup_spark.io.filesystem import LocalStorage
target, go, me = sys.argv[1:4]
text = (me + "\\n") * 200_000  # 1.2 MB: a torn write would show
while not Path(go).exists():
    time.sleep(0.005)
print(LocalStorage().put_if_absent(target, text))
"""


def test_put_if_absent_has_one_winner_among_racing_processes_and_a_complete_file(tmp_path):
    target, go = tmp_path / "d" / "entry", tmp_path / "go"
    names = [f"writer{i}" for i in range(4)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(target), str(go), name],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    go.touch()
    results = {
        name: p.communicate(timeout=DEADLINE)[0].strip()
        for name, p in zip(names, procs, strict=True)
    }
    winners = [name for name, won in results.items() if won == "True"]
    assert len(winners) == 1 and set(results.values()) == {"True", "False"}, results
    assert target.read_text() == (winners[0] + "\n") * 200_000
    assert sorted(p.name for p in target.parent.iterdir()) == ["entry"]  # no temporary files
    assert not LocalStorage().put_if_absent(str(target), "again")


def test_a_second_run_waits_for_the_holder_then_takes_the_lock(tmp_path):
    storage, directory = LocalStorage(), str(tmp_path / "index")
    first = acquire(storage, directory, "first run", heartbeat_seconds=0.1)
    waited_for: list[Holder] = []
    taken = []
    second = threading.Thread(
        target=lambda: taken.append(
            acquire(storage, directory, "second run", 60, on_wait=waited_for.append)
        )
    )
    second.start()
    wait_for(lambda: waited_for, "the second run to wait")
    assert waited_for[0].token == first.holder.token and not taken
    first.release()
    second.join(DEADLINE)
    (lease,) = taken
    lock = json.loads((tmp_path / "index" / LOCK_FILE).read_text())
    assert lock["token"] == lease.holder.token and lock["purpose"] == "second run"
    assert lock["pid"] == os.getpid() and lock["host"] == lease.holder.host
    lease.release()
    assert list((tmp_path / "index").iterdir()) == []  # lock and heartbeats gone


HOLDER = """
import sys, time
from pathlib import Path
from neardup_spark.io import lease as lease_module
from neardup_spark.io.filesystem import LocalStorage
from neardup_spark.io.lease import acquire
directory, ready = sys.argv[1:3]
lease = acquire(LocalStorage(), directory, "holder process", heartbeat_seconds=0.1)
Path(ready).touch()
time.sleep(600)
"""


def test_a_lock_held_by_a_live_process_times_out_naming_it_and_a_killed_one_is_taken_over(
    tmp_path,
):
    storage, directory = LocalStorage(), str(tmp_path / "out")
    ready = tmp_path / "ready"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, directory, str(ready)], cwd=REPO, start_new_session=True
    )
    try:
        wait_for(ready.exists, "the holder to take the lock")
        with pytest.raises(LockTimeout) as refused:
            acquire(storage, directory, "impatient run", 0)
        message = str(refused.value)
        assert f"pid {holder.pid} on host" in message and "holder process" in message
        started = time.monotonic()
        with pytest.raises(LockTimeout):
            acquire(storage, directory, "patient run", 0.5)
        assert time.monotonic() - started >= 0.5
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(DEADLINE)
        token = json.loads((tmp_path / "out" / LOCK_FILE).read_text())["token"]
        assert (tmp_path / "out" / f"{HEARTBEAT_PREFIX}{token}").exists()
        started = time.monotonic()
        lease = acquire(storage, directory, "next run", 0)  # dead pid on this host: at once
        assert time.monotonic() - started < 5
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait(DEADLINE)
    assert not (tmp_path / "out" / f"{HEARTBEAT_PREFIX}{token}").exists()
    lease.release()


def foreign_holder(token: str) -> Holder:
    return Holder(token, "run elsewhere", "neardup dedupe", "other-host", 4242, "", "", "t0")


def test_a_silent_holder_elsewhere_is_stale_after_its_heartbeat_stops(tmp_path):
    storage, root = LocalStorage(), tmp_path / "index"
    root.mkdir()
    (root / LOCK_FILE).write_text(foreign_holder("abc").to_text())
    (root / f"{HEARTBEAT_PREFIX}abc").write_text('{"beats": 7}')
    started = time.monotonic()
    lease = acquire(storage, str(root), "next run", 30, stale_after=0.5)
    assert time.monotonic() - started >= 0.5
    assert lease.held() and not (root / f"{HEARTBEAT_PREFIX}abc").exists()
    lease.release()


def test_a_holder_whose_heartbeat_moves_is_never_broken(tmp_path):
    storage, directory = LocalStorage(), str(tmp_path / "index")
    holder = acquire(storage, directory, "slow night", heartbeat_seconds=0.05)
    with pytest.raises(LockTimeout, match="slow night"):
        acquire(storage, directory, "second night", 1.5, stale_after=0.5)
    holder.check()  # still held
    holder.release()


def test_a_lease_broken_under_its_holder_stops_its_commit(tmp_path):
    storage, root = LocalStorage(), tmp_path / "index"
    lease = acquire(storage, str(root), "night", heartbeat_seconds=60)
    (root / LOCK_FILE).rename(root / "moved")
    (root / LOCK_FILE).write_text(foreign_holder("newer").to_text())
    with pytest.raises(LeaseLost, match="nothing of this run was committed"):
        lease.check()
    lease.release()
    assert json.loads((root / LOCK_FILE).read_text())["token"] == "newer"  # not deleted


def test_a_reused_pid_does_not_keep_a_lock_alive():
    me = Holder.this_process("x")
    assert not me.is_gone()
    assert Holder(**{**me.__dict__, "pid_start": "1"}).is_gone()
    assert not foreign_holder("t").is_gone()  # another host: judged by heartbeat only


def test_a_dead_pid_on_another_machine_of_the_same_name_is_not_taken_for_gone():
    """Two machines may share a host name (an unset one) and, outside containers, the pid
    namespace's id: the boot id tells them apart. A lock file of an older version (no boot id)
    is judged by host and namespace, as before."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    here = Holder.this_process("x")
    assert here.boot_id  # Linux
    gone_here = Holder(**{**here.__dict__, "pid": int(dead.stdout), "pid_start": ""})
    assert gone_here.is_gone()
    assert not Holder(**{**gone_here.__dict__, "boot_id": "another-machine"}).is_gone()
    older = {k: v for k, v in json.loads(gone_here.to_text()).items() if k != "boot_id"}
    assert Holder.from_text(json.dumps(older)).is_gone()


def test_a_lock_put_back_by_a_waiter_keeps_its_holders_heartbeat(tmp_path):
    """A waiter that judged the lock stale moves it aside and puts it back when it turns out to
    be alive (_break_stale): the holder's heartbeat, which saw no lock meanwhile, goes on."""
    storage, root = LocalStorage(), tmp_path / "index"
    lease = acquire(storage, str(root), "night", heartbeat_seconds=0.05)
    beats = root / f"{HEARTBEAT_PREFIX}{lease.holder.token}"
    (root / LOCK_FILE).rename(root / "aside")
    time.sleep(0.3)  # several beats find no lock
    (root / "aside").rename(root / LOCK_FILE)
    before = json.loads(beats.read_text())["beats"]
    wait_for(
        lambda: json.loads(beats.read_text())["beats"] > before, "a beat after the lock is back"
    )
    lease.check()
    lease.release()


def test_the_lock_file_names_the_command_without_its_secrets():
    assert doctest.testmod(lease_module).failed == 0
    line = lease_module.command_line(["neardup", "dedupe", "--set", "spark.x.password=pw", "a=b"])
    assert line == "neardup dedupe --set spark.x.password=*** a=b"


def test_lease_entries():
    assert all(is_lease_entry(n) for n in ("_lock", "_lock.heartbeat.ab", "._lock.1.tmp"))
    assert not any(is_lease_entry(n) for n in ("_locks", "lock", "_SUCCESS"))


def test_hadoop_storage_creates_exclusively_and_holds_a_lease(spark, tmp_path):
    """The Hadoop FileSystem path (HDFS, object stores) on the local file system: rename
    without overwrite refuses an existing target; a lease works on it as on local paths."""
    from neardup_spark.io.hadoop_storage import HadoopStorage

    root = f"file://{tmp_path}/hadoop"
    storage = HadoopStorage(spark.sparkContext._jsc.hadoopConfiguration(), root)
    assert storage.put_if_absent(f"{root}/entry", "first\n")
    assert not storage.put_if_absent(f"{root}/entry", "second\n")
    assert storage.read_text(f"{root}/entry") == "first\n"
    assert [n for n in storage.list(root) if not n.endswith(".crc")] == ["entry"]
    lease = acquire(storage, root, "night on hadoop", heartbeat_seconds=0.1)
    with pytest.raises(LockTimeout, match="night on hadoop"):
        acquire(storage, root, "second", 0)
    lease.release()
    assert [n for n in storage.list(root) if not n.endswith(".crc")] == ["entry"]


def test_hadoop_storage_reads_a_file_again_while_its_checksum_catches_up(
    spark, tmp_path, monkeypatch
):
    """Hadoop's ``file://`` keeps a ``.crc`` beside each file and renames it after the file
    when a heartbeat is replaced, so a reader in between sees bytes and checksum disagree
    (found under load: the lease test above failed with a ChecksumException). Such a read is
    made again, and succeeds once they agree; a disagreement that lasts still fails. Here the
    file's bytes are changed behind the checksum; the wait before the second read puts the
    replacement's checksum in place, as the renaming writer would."""
    from neardup_spark.io import hadoop_storage
    from neardup_spark.io.hadoop_storage import HadoopStorage

    root = f"file://{tmp_path}/hadoop"
    storage = HadoopStorage(spark.sparkContext._jsc.hadoopConfiguration(), root)
    beat = f"{root}/_lock.heartbeat.t"
    storage.write_text(beat, '{"beat": 1}\n')
    local = tmp_path / "hadoop" / "_lock.heartbeat.t"
    crc = tmp_path / "hadoop" / "._lock.heartbeat.t.crc"
    assert crc.is_file()
    storage.write_text(f"{root}/next", '{"beat": 2}\n')  # the replacement, with its checksum
    local.write_text('{"beat": 2}\n')  # its bytes in place, the old checksum still beside them
    waits: list[float] = []

    def checksum_arrives(seconds: float) -> None:
        waits.append(seconds)
        (tmp_path / "hadoop" / ".next.crc").replace(crc)

    monkeypatch.setattr(hadoop_storage, "sleep", checksum_arrives)
    assert storage.read_text(beat) == '{"beat": 2}\n'
    assert len(waits) == 1
    # A lasting disagreement is an error, after a few attempts.
    local.write_text('{"beat": 3}\n')
    monkeypatch.setattr(hadoop_storage, "sleep", waits.append)
    with pytest.raises(Exception, match="ChecksumException"):
        storage.read_text(beat)
    assert len(waits) == 1 + hadoop_storage.READ_ATTEMPTS - 1
