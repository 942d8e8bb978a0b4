"""The files that hold an index's contents (one distinct normalised text each), read and written
on the executors with PyArrow, no Spark.

A *part* is two Arrow IPC files with the same rows, sorted by the content's exact fingerprint:

* ``NAME.keys.arrow`` (uncompressed, memory-mapped when local): ``fp`` (int64) and ``band_keys``
  (the content's LSH band keys as ``bands`` little-endian int64 in one fixed-size binary). The
  nightly probe scans it whole: ``8 + 8 * bands`` bytes per content (232 at 28 bands), the only
  index-sized read of a night.
* ``NAME.texts.arrow`` (zstd): ``fp`` and ``text`` (the normalised text), in record batches of
  :data:`TEXT_BATCH_ROWS` rows. Verification reads the batches holding the contents it needs,
  each on its own (the IPC footer locates them), never the whole file: a night fetches a few
  thousand texts of a million without decoding the rest.

Texts, not shingle sets, are stored: the verifying task shingles them with the same kernel the
full run uses, so the sets are bit for bit the full run's, and a compressed text (~1.1 KB for a
500-word page) is a quarter of its 64-bit shingle set.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from neardup_spark.errors import IndexDamaged
from neardup_spark.io.filesystem import join, pyarrow_filesystem
from neardup_spark.kernels.exact_fingerprint import exact_fingerprints

TEXT_BATCH_ROWS = 8
# read_texts reads a whole texts file once the record batches it needs are this share of it
# (1 in 4): one decompression call instead of thousands.
_WHOLE_FILE_SHARE = 4
# Texts taken into file order this many at a time (a multiple of TEXT_BATCH_ROWS).
_TEXT_BLOCK_ROWS = 512 * TEXT_BATCH_ROWS
KEYS_SUFFIX = ".keys.arrow"
TEXTS_SUFFIX = ".texts.arrow"
TEXTS_CODEC = "zstd"
FP, BAND_KEYS, TEXT = "fp", "band_keys", "text"
# Band keys whose top bits fall in this many buckets are checked exactly (a prefilter that makes
# the probe of a million contents' keys a few vectorised passes instead of a binary search each).
_PREFILTER_BITS = 24


def part_name(first_fp: int) -> str:
    """A part's name: its first (smallest) fingerprint, so parts written again are the same."""
    return f"part-{first_fp & 0xFFFFFFFFFFFFFFFF:016x}"


def write_ipc_file(
    path: str,
    schema: pa.Schema,
    pieces: Iterable[pa.Table | pa.RecordBatch],
    batch_rows: int | None,
    codec: str | None,
) -> int:
    """Write ``pieces`` (one after another: a table in record batches of ``batch_rows`` rows, a
    record batch as it is, even empty) as an Arrow IPC file under a temporary name, then
    renamed; its bytes."""
    fs, inner = pyarrow_filesystem(path)
    fs.create_dir(inner.rpartition("/")[0], recursive=True)
    tmp = f"{inner}.tmp"
    # One thread: a texts file is thousands of 8-row batches, and handing each batch's two
    # buffers to Arrow's thread pool cost more than compressing them (20,000 pages: 0.87 ->
    # 0.35 s); a Spark task has its core, and the other cores have tasks of their own.
    options = pa.ipc.IpcWriteOptions(
        compression=pa.Codec(codec) if codec else None, use_threads=False
    )
    with (
        fs.open_output_stream(tmp) as sink,
        pa.ipc.new_file(sink, schema, options=options) as writer,
    ):
        for piece in pieces:
            if isinstance(piece, pa.RecordBatch):
                writer.write_batch(piece)
            else:
                writer.write_table(piece, max_chunksize=batch_rows)
    fs.move(tmp, inner)
    return int(fs.get_file_info(inner).size)


def open_input(path: str) -> Any:
    """A random-access file: memory-mapped when local, else through PyArrow's file system."""
    fs, inner = pyarrow_filesystem(path)
    if isinstance(fs, pa.fs.LocalFileSystem):
        return pa.memory_map(inner, "r")
    return fs.open_input_file(inner)


def band_key_matrix(column: pa.Array | pa.ChunkedArray, bands: int) -> np.ndarray:
    """A ``list<int64>`` column of ``bands`` keys per row -> ``(n, bands)`` int64."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return flat.reshape(len(column), bands) if len(column) else np.zeros((0, bands), np.int64)


@dataclass(frozen=True)
class PartSummary:
    """What :func:`write_part` wrote."""

    name: str
    rows: int
    keys_bytes: int
    texts_bytes: int


def write_part(
    directory: str,
    fps: np.ndarray,
    band_keys: np.ndarray,
    texts: pa.Array,
    text_rows: np.ndarray | None = None,
) -> PartSummary:
    """Write one part into ``directory``: ``fps`` (int64, sorted, distinct), their band keys
    (``(n, bands)`` int64) and normalised texts (strings): in the same order, or in any order
    with ``text_rows[i]`` the row of ``texts`` that is ``fps[i]``'s (taken a block at a time:
    a part's texts are not copied whole to be sorted)."""
    n, bands = band_keys.shape
    name = part_name(int(fps[0]))
    keys = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(8 * bands), n, [None, pa.py_buffer(np.ascontiguousarray(band_keys, "<i8"))]
    )
    fp_column = pa.array(fps, pa.int64())
    keys_table = pa.table({FP: fp_column, BAND_KEYS: keys})
    keys_bytes = write_ipc_file(
        join(directory, name + KEYS_SUFFIX), keys_table.schema, [keys_table], None, None
    )

    def text_blocks() -> Iterator[pa.Table]:
        for start in range(0, n, _TEXT_BLOCK_ROWS):  # whole batches: row r in batch r // 8
            end = min(start + _TEXT_BLOCK_ROWS, n)
            if text_rows is None:
                block = texts.slice(start, end - start)
            else:
                block = texts.take(pa.array(text_rows[start:end]))
            yield pa.table({FP: fp_column[start:end], TEXT: block.cast(pa.large_string())})

    schema = pa.schema([(FP, pa.int64()), (TEXT, pa.large_string())])
    texts_path = join(directory, name + TEXTS_SUFFIX)
    texts_bytes = write_ipc_file(texts_path, schema, text_blocks(), TEXT_BATCH_ROWS, TEXTS_CODEC)
    return PartSummary(name, n, keys_bytes, texts_bytes)


def read_keys(path: str, sha256: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A part's keys file (``path`` ends in :data:`KEYS_SUFFIX`): ``(fps int64[n], band keys
    int64[n, bands])``, zero-copy views of the memory-mapped file when local. With ``sha256``
    (recorded at commit), the file's bytes are checked against it first (the scan reads them
    all anyway): :class:`IndexDamaged` if they differ or do not decode."""
    try:
        data = open_input(path).read_buffer()
    except OSError as exc:
        raise IndexDamaged(f"{path}: cannot be read ({exc})") from exc
    if sha256 is not None and hashlib.sha256(memoryview(data)).hexdigest() != sha256:
        raise IndexDamaged(f"{path}: its bytes changed since it was written (SHA-256 differs)")
    try:
        table = pa.ipc.open_file(pa.BufferReader(data)).read_all().combine_chunks()
    except (pa.ArrowInvalid, OSError) as exc:
        raise IndexDamaged(f"{path}: not a readable keys file ({exc})") from exc
    fps = table.column(FP).chunk(0).to_numpy()
    keys = table.column(BAND_KEYS).chunk(0)
    width = keys.type.byte_width // 8
    data = np.frombuffer(keys.buffers()[1], dtype="<i8")
    start = keys.offset * width
    return fps, data[start : start + len(keys) * width].reshape(len(keys), width)


def sorted_member_mask(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``values`` (int64) that are in ``sorted_set`` (sorted int64), as a boolean mask: a bitmap
    of the set's top bits first, then an exact binary search of the few that pass it.

    >>> sorted_member_mask(np.array([5, -3, 7, 5]), np.array([-3, 5])).tolist()
    [True, True, False, True]
    """
    mask = np.zeros(len(values), dtype=bool)
    if not len(values) or not len(sorted_set):
        return mask
    shift = np.uint64(64 - _PREFILTER_BITS)
    bitmap = np.zeros(1 << _PREFILTER_BITS, dtype=bool)
    bitmap[sorted_set.view(np.uint64) >> shift] = True
    maybe = np.flatnonzero(bitmap[values.view(np.uint64) >> shift])
    found = np.searchsorted(sorted_set, values[maybe])
    found = np.minimum(found, len(sorted_set) - 1)
    mask[maybe[sorted_set[found] == values[maybe]]] = True
    return mask


@dataclass
class ProbeHits:
    """What one part holds of a batch: its contents (``known``) and, per band key of the
    batch, up to ``top`` of its contents with that key (the smallest fingerprints)."""

    known: np.ndarray  # fps of the part that the batch holds
    keys: np.ndarray  # band key of each match
    fps: np.ndarray  # the part's content with that key
    rows: np.ndarray  # its row in the part


def probe_part(
    fps: np.ndarray, band_keys: np.ndarray, batch_fps: np.ndarray, batch_keys: np.ndarray, top: int
) -> ProbeHits:
    """Probe one part with the batch's fingerprints and band keys (both sorted int64)."""
    known = fps[sorted_member_mask(fps, batch_fps)]
    flat = band_keys.reshape(-1)
    hit = np.flatnonzero(sorted_member_mask(flat, batch_keys))
    rows = hit // band_keys.shape[1]
    keys, match_fps = flat[hit], fps[rows]
    order = np.lexsort((match_fps, keys))
    keys, match_fps, rows = keys[order], match_fps[order], rows[order]
    # Rank within each key's run; keep the first ``top`` (a key's smallest fingerprints).
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, int)
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(keys)]))
    keep = np.arange(len(keys)) - run_start < top
    return ProbeHits(known, keys[keep], match_fps[keep], rows[keep])


def check_texts(path: str, fps: pa.Array, texts: pa.Array) -> None:
    """Raise :class:`IndexDamaged` unless each text's exact fingerprint is its ``fp`` (the
    index is content-addressed, so a text read back is checked without any stored checksum)."""
    computed, _ = exact_fingerprints(texts)
    if not np.array_equal(computed.view(np.int64), fps.to_numpy(zero_copy_only=False)):
        raise IndexDamaged(f"{path}: a text does not match its fingerprint (its bytes changed)")


def read_texts(path: str, rows: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """The normalised texts at ``rows`` (sorted) of a part's texts file: ``(fps, texts)``.
    Reads only the record batches holding them, each once, or the whole file when they are
    most of it (compaction, a deep check); the texts are checked against their fingerprints in
    one pass. Linear in the rows and batches read (each row's place is computed, not searched
    for batch by batch)."""
    rows = np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return np.zeros(0, np.int64), pa.array([], pa.large_string())
    batches = rows // TEXT_BATCH_ROWS
    try:
        reader = pa.ipc.open_file(open_input(path))
        wanted = np.unique(batches)
        if len(wanted) * _WHOLE_FILE_SHARE >= reader.num_record_batches:
            table = reader.read_all().combine_chunks()
            fp_column, text_column = table.column(FP).chunk(0), table.column(TEXT).chunk(0)
            places = rows  # batches of TEXT_BATCH_ROWS rows: a row's place is its number
        else:
            read = [reader.get_batch(int(i)) for i in wanted]
            # One array each (a take from a ChunkedArray of ~1,500 chunks took 0.3 s, 70 times
            # the concatenation and a take from it)
            fp_column = pa.concat_arrays([batch.column(FP) for batch in read])
            text_column = pa.concat_arrays([batch.column(TEXT) for batch in read])
            starts = np.cumsum([0] + [batch.num_rows for batch in read[:-1]])
            places = starts[np.searchsorted(wanted, batches)] + rows - batches * TEXT_BATCH_ROWS
        whole = len(places) == len(fp_column) and np.array_equal(places, np.arange(len(places)))
        take = None if whole else pa.array(places)
        fps = fp_column if take is None else fp_column.take(take)
        texts = text_column if take is None else text_column.take(take)
    except (pa.ArrowException, OSError, IndexError) as exc:
        raise IndexDamaged(f"{path}: not a readable texts file ({exc})") from exc
    check_texts(path, fps, texts)
    return fps.to_numpy(), texts
