"""A run's facts are gathered once (pipeline/facts.py): each local Parquet input file's footer is
opened once by the driver before the data is read, whatever the plan then asks of it. Counted
on PyArrow's own functions (instrumentation, not a stand-in for Spark)."""

from __future__ import annotations

import os
from collections import Counter

import pyarrow.parquet as pq

from neardup_spark.config import build_config
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import generate_corpus
from tests.plans import ran

FILES = 4


def real(path) -> str:
    return os.path.realpath(str(path))


def test_each_footer_is_read_once_before_the_data(spark, tmp_path, monkeypatch):
    """A default run of a 4-file local Parquet corpus (every step in this process): every
    ``read_metadata`` and ``read_schema`` of an input file, and every ``ParquetFile`` opened
    without reading a row group, opens its footer; at most one each per file until the data
    is read (the reads of row groups open the files again, as they must), and none after."""
    table, _ = generate_corpus(400, seed=5, mean_words=60)
    (tmp_path / "in").mkdir()
    inputs = []
    for i in range(FILES):
        path = tmp_path / "in" / f"part-{i}.parquet"
        pq.write_table(table.slice(i * 100, 100), path, row_group_size=40)
        inputs.append(real(path))
    # In call order: ["footer", path] (read_metadata, read_schema), or [Counted] (opened).
    events: list[list] = []
    read_metadata, read_schema = pq.read_metadata, pq.read_schema

    def counted_metadata(where, *args, **kwargs):
        events.append(["footer", real(where)])
        return read_metadata(where, *args, **kwargs)

    def counted_schema(where, *args, **kwargs):
        events.append(["footer", real(where)])
        return read_schema(where, *args, **kwargs)

    class Counted(pq.ParquetFile):
        """A ParquetFile that says whether it read rows (else it opened a footer alone)."""

        def __init__(self, source, *args, **kwargs):
            super().__init__(source, *args, **kwargs)
            self.path = real(source) if isinstance(source, str | os.PathLike) else repr(source)
            self.read_rows = False
            events.append([self])

        def _rows(self) -> None:
            self.read_rows = True

        def read_row_group(self, *args, **kwargs):
            self._rows()
            return super().read_row_group(*args, **kwargs)

        def read_row_groups(self, *args, **kwargs):
            self._rows()
            return super().read_row_groups(*args, **kwargs)

        def iter_batches(self, *args, **kwargs):
            self._rows()
            return super().iter_batches(*args, **kwargs)

        def read(self, *args, **kwargs):
            self._rows()
            return super().read(*args, **kwargs)

    monkeypatch.setattr(pq, "read_metadata", counted_metadata)
    monkeypatch.setattr(pq, "read_schema", counted_schema)
    monkeypatch.setattr(pq, "ParquetFile", Counted)
    report = run(spark, str(tmp_path / "in"), str(tmp_path / "out"), build_config())
    ran(report, sketch="driver", pairs="driver", deduplicated="driver_copy")

    def footer_of(event: list) -> str | None:
        """The file whose footer ``event`` opened alone (None: a read of rows)."""
        if event[0] == "footer":
            return event[1]
        return None if event[0].read_rows else event[0].path

    data = [i for i, event in enumerate(events) if event[0] != "footer" and event[0].read_rows]
    # The data was read here, from every file (the instrumentation saw the reads).
    assert {events[i][0].path for i in data} >= set(inputs)
    before = Counter(footer_of(event) for event in events[: data[0]])
    assert {path: before[path] for path in inputs} == dict.fromkeys(inputs, 1), before
    after = Counter(footer_of(event) for event in events[data[0] :])
    assert not any(after[path] for path in inputs), after
