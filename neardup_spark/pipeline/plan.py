"""Where each step of a run executes, decided in one place.

A run does the same steps whatever its size; each has implementations side by side (this
process's threads, or Spark tasks and jobs) that compute the same outputs. Which one runs is a
pure function of the run's facts (:mod:`.facts`: the input's files and footers, read once; the
session), its execution settings (:class:`~neardup_spark.config.ExecutionSettings`) and, for the
steps after the per-document pass, the counts the run has found so far. Each choice comes with
its reason ("pairs: driver (5,000 docs <= driver_max_docs 200,000)"); ``report.json["plan"]``
records them, and ``neardup dedupe --explain-plan`` prints them.

The steps and their implementations::

    sketch        driver (read and sketched in this process's threads) | tasks (Spark tasks
                  read their row groups) | spark (Spark reads the input)
    pairs         driver (exact copies, candidates, verification on Arrow tables here) | spark
    verify_texts  (Spark pairs, MinHash) addresses | broadcast | bitmap | join | cleaned
    components    driver | single_task | distributed
    deduplicated  driver_copy | task_copy | spark_join | spark_bitmap
    night         (--index) a night's own steps: driver | spark
    docs_scan     (a night on the driver) the index's docs rows it needs: driver | spark
    pairs_scan    ... its stored edges: driver | spark
    night_components  the touched clusters' stable ids: driver | spark
    probe         (a night on the driver) the scan of the index's keys: driver | spark

A test (or a user, ``--set plan.STEP=WHERE``) may give a step's choice: it must be one the
facts allow, else the run is refused before it starts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from neardup_spark.config import ExecutionSettings
from neardup_spark.errors import UserError
from neardup_spark.pipeline.facts import RunFacts

# The candidates' texts come back through the driver: a corpus with more characters than this
# takes the Spark path whatever its document count (the driver's default heap is 2 GB).
DRIVER_MAX_TEXT_CHARS = 200_000_000

# Each choice as it is made (neardup dedupe --explain-plan shows them).
explained = logging.getLogger("neardup_spark.plan")

DRIVER, TASKS, SPARK = "driver", "tasks", "spark"
STEPS: dict[str, tuple[str, ...]] = {
    "sketch": (DRIVER, TASKS, SPARK),
    "pairs": (DRIVER, SPARK),
    "verify_texts": ("addresses", "broadcast", "bitmap", "join", "cleaned"),
    "components": (DRIVER, "single_task", "distributed"),
    "deduplicated": ("driver_copy", "task_copy", "spark_join", "spark_bitmap"),
    "night": (DRIVER, SPARK),
    "docs_scan": (DRIVER, SPARK),
    "pairs_scan": (DRIVER, SPARK),
    "night_components": (DRIVER, SPARK),
    "probe": (DRIVER, SPARK),
}


@dataclass(frozen=True)
class Choice:
    """Where one step runs, and why; ``feasible``: every implementation the facts allow (a
    given choice must be one of them)."""

    step: str
    where: str
    why: str
    feasible: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.step}: {self.where} ({self.why})"


def mb(value: int) -> str:
    return f"{value / 2**20:,.1f} MB"


def decide_sketch(facts: RunFacts, settings: ExecutionSettings, max_rows: int = 0) -> Choice:
    """The per-document pass: in this process's threads when the input is local Parquet in
    local mode within ``driver_read_max_bytes`` (and ``max_rows`` rows, a night's limit; 0:
    any), else in Spark tasks that read their row groups themselves, else Spark's read."""
    step, source = "sketch", facts.input
    problem = (
        "--strip-boilerplate: the cleaning pass runs as Spark tasks"
        if facts.cleaning
        else "a catalog table"
        if source.table
        else f"{source.skipped} input file(s) skipped"
        if source.skipped
        else f"its tasks run on other machines ({facts.engine.master})"
        if not facts.engine.local_threads
        else source.row_group_problem()
    )
    if problem is not None:
        return Choice(step, SPARK, problem, (SPARK,))
    feasible = (DRIVER, TASKS, SPARK)
    if not settings.driver_read_max_bytes:
        return Choice(step, SPARK, "driver_read_max_bytes 0", feasible)
    size, rows = source.id_text_bytes or 0, source.rows or 0
    limit = f"driver_read_max_bytes {mb(settings.driver_read_max_bytes)}"
    if size > settings.driver_read_max_bytes:
        return Choice(step, TASKS, f"id and text columns {mb(size)} > {limit}", feasible)
    if max_rows and rows > max_rows:
        why = f"{rows:,} docs > nightly_driver_max_docs {max_rows:,}"
        return Choice(step, TASKS, why, feasible)
    return Choice(step, DRIVER, f"id and text columns {mb(size)} <= {limit}", feasible)


def decide_pairs(
    facts: RunFacts, settings: ExecutionSettings, counts: Mapping[str, int], sketch: Choice
) -> Choice:
    """Exact copies, candidates and verification: in this process up to ``driver_max_docs``
    documents (whose texts come back through the driver, unless read here), else Spark."""
    step, rows, limit = "pairs", counts["input_rows"], settings.driver_max_docs
    if not facts.input.id_type_ordered:
        return Choice(step, SPARK, "an id type Spark and Arrow may order differently", (SPARK,))
    feasible = (DRIVER, SPARK)
    if rows > limit:
        return Choice(step, SPARK, f"{rows:,} docs > driver_max_docs {limit:,}", feasible)
    chars = counts.get("text_chars", 0)
    if sketch.where != DRIVER and chars > DRIVER_MAX_TEXT_CHARS:
        why = f"{chars:,} characters to fetch > {DRIVER_MAX_TEXT_CHARS:,}"
        return Choice(step, SPARK, why, feasible)
    return Choice(step, DRIVER, f"{rows:,} docs <= driver_max_docs {limit:,}", feasible)


def decide_verify_texts(
    facts: RunFacts, settings: ExecutionSettings, sides: int, addressed: bool, words_fit: bool
) -> Choice:
    """Where the Spark path's verification reads its candidates' texts (``sides``: twice the
    candidate pairs): the cleaned texts of --strip-boilerplate; at their addresses in local
    Parquet files, at any size; a broadcast of the sides; the bitmap scan of a Parquet input
    (``addressed``, its words broadcastable: ``words_fit``); else a join."""
    step, limit = "verify_texts", settings.broadcast_max_rows
    if facts.cleaning:
        return Choice(step, "cleaned", "--strip-boilerplate: the cleaned texts", ("cleaned",))
    at_addresses = addressed and facts.input.row_group_problem() is None
    feasible = (
        *(("addresses",) if at_addresses else ()),
        "broadcast",
        *(("bitmap",) if addressed and words_fit else ()),
        "join",
    )
    if at_addresses:
        return Choice(
            step, "addresses", "local Parquet files: read at the sides' addresses", feasible
        )
    if sides <= limit:
        return Choice(
            step, "broadcast", f"{sides:,} sides <= broadcast_max_rows {limit:,}", feasible
        )
    if addressed and words_fit:
        return Choice(step, "bitmap", f"{sides:,} sides > broadcast_max_rows {limit:,}", feasible)
    why = f"{sides:,} sides > broadcast_max_rows {limit:,}, no addresses"
    return Choice(step, "join", why, feasible)


def decide_components(edges: int, limit: int, pairs: Choice, smallest_id_members: bool) -> Choice:
    """The connected components of ``edges`` verified pairs: in this process when the pairs
    were found here (the members too when they need no input column:
    ``smallest_id_members``; else the labels, the representatives then chosen by Spark), in
    one task up to ``limit`` edges (what one task's memory holds, or
    ``components_single_task_max_edges``), else in distributed rounds."""
    step = "components"
    here = pairs.where == DRIVER
    feasible = (*((DRIVER,) if here else ()), "single_task", "distributed")
    if edges > limit:
        return Choice(step, "distributed", f"{edges:,} edges > {limit:,} one task holds", feasible)
    if here:
        what = "members" if smallest_id_members else "labels"
        why = f"pairs found here, {edges:,} edges: {what} found here"
        return Choice(step, DRIVER, why, feasible)
    return Choice(step, "single_task", f"{edges:,} edges <= {limit:,} one task holds", feasible)


def decide_deduplicated(
    facts: RunFacts,
    settings: ExecutionSettings,
    removed: int,
    clusters_here: bool,
    addressed: bool,
    words_fit: bool,
) -> Choice:
    """How ``deduplicated/`` is written: copied from local Parquet input files by this process
    (the clusters found here: ``clusters_here``) or by Spark tasks (the input's addresses
    known, a file per core at least), when a copy keeps every type as Spark would write it into
    a local OUTPUT; else by Spark from a broadcast anti-join or, for more removed ids than a
    broadcast takes, the bitmap scan of a Parquet input (``addressed``, its words broadcastable:
    ``words_fit``)."""
    step, limit = "deduplicated", settings.broadcast_max_rows
    files, cores = len(facts.input.parquet), facts.engine.cores
    problem = (
        ("no OUTPUT" if facts.output_local is None else "OUTPUT is not local")
        if not facts.output_local
        else f"{facts.input.skipped} input file(s) skipped"
        if facts.input.skipped
        else "--strip-boilerplate"
        if facts.cleaning
        else facts.input.copy_problem
    )
    bitmap = addressed and words_fit
    feasible = (
        *(("driver_copy",) if problem is None and clusters_here else ()),
        *(("task_copy",) if problem is None and addressed else ()),
        "spark_join",
        *(("spark_bitmap",) if bitmap else ()),
    )
    if problem is None and clusters_here:
        return Choice(step, "driver_copy", "clusters found here: input files copied", feasible)
    if problem is None and addressed and files >= cores:
        return Choice(step, "task_copy", f"{files} input files copied by tasks", feasible)
    why = problem or (f"{files} input files < {cores} cores" if addressed else "no addresses")
    if removed > limit and bitmap:
        why = f"{why}; {removed:,} removed > broadcast_max_rows {limit:,}"
        return Choice(step, "spark_bitmap", why, feasible)
    return Choice(step, "spark_join", why, feasible)


def decide_night(settings: ExecutionSettings, new_docs: int) -> Choice:
    """A night's own steps (contents, candidates, verification, stable ids, its segment): in
    this process up to ``nightly_driver_max_docs`` new documents, else as Spark jobs."""
    limit, feasible = settings.nightly_driver_max_docs, (DRIVER, SPARK)
    if new_docs <= limit:
        why = f"{new_docs:,} docs <= nightly_driver_max_docs {limit:,}"
        return Choice("night", DRIVER, why, feasible)
    return Choice(
        "night", SPARK, f"{new_docs:,} docs > nightly_driver_max_docs {limit:,}", feasible
    )


def python_tasks_expected(facts: RunFacts, settings: ExecutionSettings) -> bool:
    """Whether a run will run Python tasks, judged before its read from a preview of its facts
    (a fresh process then starts its Python workers early): not when its per-document pass runs
    here and its pairs will be found here (its footers' rows within ``driver_max_docs``)."""
    if facts.cleaning:
        return True
    here = decide_sketch(facts, settings).where == DRIVER
    return not (here and (facts.input.rows or 0) <= settings.driver_max_docs)


def decide_night_sketch(facts: RunFacts, settings: ExecutionSettings) -> Choice:
    """A night's per-document pass: in this process's threads as a full run's (up to
    ``nightly_driver_max_docs`` documents: its texts stay here for its verification), else the
    Spark pass that also stashes its normalised texts for the night's Spark steps (never tasks
    reading row groups: the stash is that pass's; and always when the night's own steps are
    given to Spark, ``plan.night=spark``, as they read the stash)."""
    limit = settings.nightly_driver_max_docs
    run = decide_sketch(facts, settings, max_rows=limit)
    feasible = (DRIVER, SPARK) if DRIVER in run.feasible else (SPARK,)
    if settings.plan.get("night") == SPARK:
        why = "night given: spark (its steps read the texts the Spark pass stashes)"
        return Choice("sketch", SPARK, why, (SPARK,))
    if not limit:
        return Choice("sketch", SPARK, "nightly_driver_max_docs 0", feasible)
    return Choice("sketch", DRIVER if run.where == DRIVER else SPARK, run.why, feasible)


def decide_index_scan(table: str, rows: int, readable: bool, settings: ExecutionSettings) -> Choice:
    """How a night on the driver reads the rows it needs of the index's ``table`` (``rows``
    rows): a filtered PyArrow scan here when the index recorded its files for this process
    (``readable``) within ``nightly_driver_scan_max_rows``, else a Spark job."""
    step, limit = f"{table}_scan", settings.nightly_driver_scan_max_rows
    if not readable:
        return Choice(step, SPARK, "its files were not recorded where this process reads", (SPARK,))
    feasible = (DRIVER, SPARK)
    if rows > limit:
        why = f"{rows:,} rows > nightly_driver_scan_max_rows {limit:,}"
        return Choice(step, SPARK, why, feasible)
    return Choice(
        step, DRIVER, f"{rows:,} rows <= nightly_driver_scan_max_rows {limit:,}", feasible
    )


def decide_probe(facts: RunFacts) -> Choice:
    """A night on the driver's scan of every contents part of the index (its keys): by threads
    of this process in local mode, else a Spark job (its few rows come back)."""
    if facts.engine.local_threads:
        why = f"local mode: {facts.engine.local_threads} threads here"
        return Choice("probe", DRIVER, why, (DRIVER, SPARK))
    return Choice("probe", SPARK, f"tasks run on other machines ({facts.engine.master})", (SPARK,))


def decide_night_components(members: int, limit: int) -> Choice:
    """A night's stable ids over the ``members`` of the clusters it touches: in this process
    up to ``limit`` (what one task's memory holds, or ``components_single_task_max_edges``),
    else distributed Spark jobs."""
    feasible, step = (DRIVER, SPARK), "night_components"
    if members > limit:
        return Choice(step, SPARK, f"{members:,} members > {limit:,} one task holds", feasible)
    return Choice(step, DRIVER, f"{members:,} members <= {limit:,} one task holds", feasible)


class Plan:
    """A run's choices, each decided once, in the order the run reaches its steps, and kept
    for the report. The settings' ``plan``: choices made beforehand (tests, ``--set
    plan.STEP=WHERE``), each checked against what the facts allow when its step is reached."""

    def __init__(self, facts: RunFacts, settings: ExecutionSettings | None = None) -> None:
        self.facts = facts
        self.settings = settings or ExecutionSettings()
        self.given = dict(self.settings.plan)
        for step, where in self.given.items():
            if where not in STEPS.get(step, ()):
                known = "; ".join(f"{s}: {', '.join(w)}" for s, w in STEPS.items())
                raise UserError(f"plan: no step {step}={where} (steps: {known})")
        self.choices: dict[str, Choice] = {}

    def record(self, decided: Choice) -> Choice:
        """Keep ``decided`` (the decider's choice), or the step's given choice, which must be
        feasible."""
        where = self.given.get(decided.step)
        if where is not None and where != decided.where:
            if where not in decided.feasible:
                raise UserError(
                    f"plan: {decided.step}={where} is not possible for this run ("
                    f"{decided.why}); possible: {', '.join(decided.feasible)}"
                )
            decided = Choice(decided.step, where, "given", decided.feasible)
        if self.choices.get(decided.step) != decided:
            explained.info("%s", decided)
        self.choices[decided.step] = decided
        return decided

    def where(self, step: str) -> str | None:
        """The choice of ``step`` made so far (None: not decided, or not a step of this run)."""
        choice = self.choices.get(step)
        return choice.where if choice else None

    def section(self) -> dict[str, dict[str, str]]:
        """``report.json["plan"]``: each step's choice and reason, in the order decided."""
        return {c.step: {"where": c.where, "why": c.why} for c in self.choices.values()}

    def lines(self) -> list[str]:
        return [str(c) for c in self.choices.values()]
