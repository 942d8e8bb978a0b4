"""Per-document work on one Arrow batch: pure functions (NumPy, PyArrow, the kernels; no Spark).

Each ``*_columns_fn(...)`` factory captures plain settings and returns a function from one
``pyarrow.RecordBatch`` to the columns a stage declares; :mod:`neardup_spark.stages` runs them
in ``mapInArrow``. The worker daemon and the nightly index's hashing probe call them directly.
"""

from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa

BatchFn = Callable[[pa.RecordBatch], pa.RecordBatch]


def over_batches(
    per_batch: BatchFn,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``per_batch`` applied to each batch of a ``mapInArrow`` partition."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return map(per_batch, batches)

    return run


def with_names(
    run: Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]], names: list[str]
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``run`` over batches whose columns arrive under other names, given ``names`` (in order)
    first: :func:`neardup_spark.stages.names.map_in_arrow`'s input columns keep their own names.
    """

    def renamed(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return run(
            pa.RecordBatch.from_arrays(
                batch.columns,
                schema=pa.schema(
                    [field.with_name(name) for field, name in zip(batch.schema, names, strict=True)]
                ),
            )
            for batch in batches
        )

    return renamed
