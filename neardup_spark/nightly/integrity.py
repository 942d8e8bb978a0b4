"""Checksums of an index's files: recorded when a version is committed, checked when a run reads
the index, and in full by ``neardup index verify DIR``.

Every file of a segment (``part-*.keys.arrow``, ``part-*.texts.arrow``, the Parquet files of
``docs/`` and ``pairs/``) and of a batch's results is recorded in the manifest with its size and
SHA-256 (``"files": {"RELATIVE/PATH": [bytes, "sha256"]}``), computed on the driver at commit
(the files are immutable once written). What each reader checks:

* every run (night, compaction), before it reads the index: that every recorded file exists
  with its recorded size (one listing of the index) and, by default (``index_check: full``),
  every file's SHA-256 (read on the driver, ~1.7 GB/s of hashing); with ``index_check: quick``
  only those of ``docs`` and ``pairs`` (compact, and read by Spark scans that could not tell a
  damaged page from data), the rest being checked as it is read:
* the keys scan (executors): the SHA-256 of each keys file, which it reads whole anyway;
* the texts reads: each text it decodes against its own fingerprint (the index is
  content-addressed: a text's ``exact_fp`` is the SHA-256-64 of the text), so a night checks
  the few thousand texts it reads without reading the rest;
* ``neardup index verify``: everything, byte for byte.

A file that is missing, of another size or with other bytes raises :class:`IndexDamaged`
(exit 1), naming it and the remedy. Files are read through PyArrow's file systems (no JVM);
where the driver cannot reach the index that way (HDFS without libhdfs), no checksums are
recorded and the checks that need them are skipped, with a warning.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow.fs as pafs

from neardup_spark.errors import IndexDamaged
from neardup_spark.io.filesystem import join, pyarrow_filesystem
from neardup_spark.nightly.content_files import KEYS_SUFFIX, TEXTS_SUFFIX, read_keys, read_texts

log = logging.getLogger(__name__)

FILES = "files"
SEGMENTS_DIR, BATCHES_DIR = "segments", "batches"
READ_CHUNK = 8 << 20
HASH_THREADS = 4
# Segment tables whose files every run checks byte for byte (compact, and read by Spark scans
# that could not tell a damaged page from data).
CHECKED_EACH_RUN = ("docs/", "pairs/")
MOST_NAMED = 5


@dataclass(frozen=True)
class Problem:
    """One damaged file: its path and what is wrong with it."""

    path: str
    what: str
    owner: str  # "segment S (batch N)" or "results of batch N"

    def line(self) -> str:
        return f"{self.path}: {self.what} ({self.owner})"


def is_data_file(relative: str) -> bool:
    """Files the index's readers use: not Hadoop's ``.crc`` side files nor ``_SUCCESS``."""
    name = relative.rsplit("/", 1)[-1]
    return not name.startswith((".", "_"))


def sha256_of(fs: pafs.FileSystem, path: str) -> str:
    """The SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with fs.open_input_stream(path) as stream:
        while chunk := stream.read(READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def listed_sizes(fs: pafs.FileSystem, base: str) -> dict[str, int]:
    """``{path relative to base: bytes}`` of every file under ``base`` (none if it is absent)."""
    selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
    prefix = base.rstrip("/") + "/"
    return {
        info.path[len(prefix) :]: int(info.size)
        for info in fs.get_file_info(selector)
        if info.type == pafs.FileType.File and info.path.startswith(prefix)
    }


def record_files(directory: str) -> dict[str, list[Any]] | None:
    """``{relative path: [bytes, sha256]}`` of the data files under ``directory``, or None
    where the driver cannot read it through PyArrow."""
    try:
        fs, base = pyarrow_filesystem(directory)
        sizes = {rel: n for rel, n in listed_sizes(fs, base).items() if is_data_file(rel)}
    except (OSError, ValueError, ImportError) as exc:
        log.warning("no checksums recorded for %s: %s", directory, exc)
        return None
    names = sorted(sizes)
    with ThreadPoolExecutor(HASH_THREADS) as pool:
        digests = list(pool.map(lambda rel: sha256_of(fs, f"{base}/{rel}"), names))
    return {rel: [sizes[rel], digest] for rel, digest in zip(names, digests, strict=True)}


def stamp_manifest(root: str, manifest: dict[str, Any]) -> None:
    """Record the files of the segments and batch results ``manifest`` adds (those without a
    ``files`` entry yet; an index written before checksums gets them at its next commit)."""
    for segment in manifest["segments"]:
        if FILES not in segment:
            segment[FILES] = record_files(join(root, SEGMENTS_DIR, segment["name"]))
    for batch in manifest["batches"]:
        if FILES not in batch and batch.get("results"):
            batch[FILES] = record_files(results_dir(root, batch))


def results_dir(root: str, batch: dict[str, Any]) -> str:
    """Where a batch's results are (the manifest names them relative to the index)."""
    return join(root, BATCHES_DIR, str(batch["results"]).rstrip("/").rsplit("/", 1)[-1])


def recorded(root: str, manifest: dict[str, Any]) -> Iterator[tuple[str, int, str, str]]:
    """``(path, bytes, sha256, owner)`` of every file the manifest records."""
    for segment in manifest["segments"]:
        owner = f"segment {segment['name']} (batch {segment.get('batch', '?')})"
        base = join(root, SEGMENTS_DIR, segment["name"])
        for rel, (size, digest) in (segment.get(FILES) or {}).items():
            yield join(base, rel), int(size), str(digest), owner
    for batch in manifest["batches"]:
        owner = f"results of batch {batch.get('seq', '?')}"
        results = results_dir(root, batch)
        for rel, (size, digest) in (batch.get(FILES) or {}).items():
            yield join(results, rel), int(size), str(digest), owner


def unrecorded(manifest: dict[str, Any]) -> list[str]:
    """Segments and batches of the manifest with no checksums recorded."""
    names = [f"segment {s['name']}" for s in manifest["segments"] if not s.get(FILES)]
    return names + [
        f"results of batch {b.get('seq')}"
        for b in manifest["batches"]
        if b.get("results") and not b.get(FILES)
    ]


def find_problems(
    root: str, manifest: dict[str, Any], full: bool, wanted: Iterable[str] = CHECKED_EACH_RUN
) -> list[Problem]:
    """The recorded files that are missing or of another size (one listing of ``root``), and
    those whose SHA-256 differs: of every file when ``full``, else of the segment files under
    the ``wanted`` prefixes."""
    fs, base = pyarrow_filesystem(root)
    present = listed_sizes(fs, base)
    prefix = base.rstrip("/") + "/"
    root_prefix = root.rstrip("/") + "/"
    problems: list[Problem] = []
    to_hash: list[tuple[str, str, str, str]] = []
    wanted = tuple(wanted)
    for path, size, digest, owner in recorded(root, manifest):
        if not path.startswith(root_prefix):  # results kept outside the index: not ours to check
            continue
        rel = path[len(root_prefix) :]
        if rel not in present:
            problems.append(Problem(path, "missing", owner))
        elif present[rel] != size:
            problems.append(Problem(path, f"{present[rel]:,} bytes, {size:,} written", owner))
        elif full or (rel.startswith(f"{SEGMENTS_DIR}/") and any(f"/{t}" in rel for t in wanted)):
            to_hash.append((path, prefix + rel, digest, owner))
    with ThreadPoolExecutor(HASH_THREADS) as pool:
        actual = list(pool.map(lambda item: sha256_of(fs, item[1]), to_hash))
    for (path, _, digest, owner), got in zip(to_hash, actual, strict=True):
        if got != digest:
            problems.append(Problem(path, "its bytes changed (SHA-256 differs)", owner))
    return problems


def damage_message(root: str, problems: list[Problem]) -> str:
    """One line: what is damaged and what to do."""
    named = "; ".join(p.line() for p in problems[:MOST_NAMED])
    more = f"; and {len(problems) - MOST_NAMED} more" if len(problems) > MOST_NAMED else ""
    return (
        f"the index at {root} is damaged: {named}{more}. Nothing was changed. Restore the "
        "file(s) from a backup or copy of the index (index files never change once written, "
        "so any copy taken after that batch is good), or rebuild the index by replaying the "
        "nights (docs/nightly.md, 'Compacting and rebuilding the index'); "
        f"`neardup index verify {root}` lists every damaged file"
    )


def check_before_reading(root: str, manifest: dict[str, Any] | None, full: bool) -> None:
    """What a run checks before it reads the index: raises :class:`IndexDamaged` for a
    missing or resized file, or bytes that changed (of every file when ``full``, else of the
    ``docs`` and ``pairs`` files)."""
    if manifest is None:
        return
    try:
        problems = find_problems(root, manifest, full=full)
    except (OSError, ValueError, ImportError) as exc:
        log.warning("index %s: files not checked: %s", root, exc)
        return
    if problems:
        raise IndexDamaged(damage_message(root, problems))


@dataclass
class Verification:
    """What ``neardup index verify`` found."""

    files: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)


def verify_files(root: str, manifest: dict[str, Any]) -> Verification:
    """Every recorded file of the committed version checked byte for byte; the contents parts
    of segments written before checksums existed decoded whole and checked against their
    fingerprints."""
    problems = find_problems(root, manifest, full=True)
    files = list(recorded(root, manifest))
    old = unrecorded(manifest)
    for segment in manifest["segments"]:
        if segment.get(FILES):
            continue
        owner = f"segment {segment['name']} (batch {segment.get('batch', '?')})"
        for part in segment.get("parts", []):
            path = join(root, SEGMENTS_DIR, segment["name"], part["name"])
            try:
                fps, _ = read_keys(path + KEYS_SUFFIX)
                read_texts(path + TEXTS_SUFFIX, np.arange(len(fps)))
            except IndexDamaged as exc:
                problems.append(Problem(path, str(exc).split(": ", 1)[-1], owner))
    return Verification(len(files), sum(size for _, size, _, _ in files), problems, old)
