"""The ``neardup`` command line: ``dedupe`` (``--index`` for nightly runs), ``index``,
``ingest``, ``fingerprint``, ``report``, ``explain``, ``evaluate``, ``generate`` (and ``bench``).

Exit codes: 0 success, 2 user error (bad arguments, input or output location; no traceback),
1 job failure.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from neardup_spark.config import METHODS, REPRESENTATIVE_RULES, DedupeConfig, build_config
from neardup_spark.errors import EXIT_FAILURE, EXIT_OK, EXIT_USER_ERROR, UserError

log = logging.getLogger("neardup_spark")


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as a UserError (exit 2, one clear line)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise UserError(f"{self.prog}: {message}")


def add_dedupe_options(parser: argparse.ArgumentParser) -> None:
    """The options shared by ``neardup dedupe`` and ``jobs/dedupe.py``."""
    parser.add_argument("input", help="Parquet file or directory (any path Spark reads)")
    parser.add_argument(
        "output",
        help="output directory (clusters/, pairs/, deduplicated/, report.json)",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FILE",
        help="YAML settings layered over the defaults (repeatable)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="override one setting, e.g. --set normalize.casefold=false or "
        "--set spark.driver.memory=4g (repeatable)",
    )
    parser.add_argument("--method", choices=METHODS, help="dedupe method (default minhash)")
    parser.add_argument("--id-col", help="id column (default id)")
    parser.add_argument("--text-col", help="text column (default text)")
    parser.add_argument("--ngram", type=int, help="words per shingle (default 5)")
    parser.add_argument("--num-perm", type=int, help="MinHash sketch size (default 200)")
    parser.add_argument("--threshold", type=float, help="Jaccard a pair must reach (default 0.8)")
    parser.add_argument("--bands", type=int, help="LSH bands (default: derived from the threshold)")
    parser.add_argument("--rows", type=int, help="rows per LSH band (with --bands)")
    parser.add_argument("--seed", type=int, help="seed of the MinHash permutations (default 42)")
    parser.add_argument("--hamming-k", type=int, help="simhash: max differing bits (default 3)")
    parser.add_argument("--blocks", type=int, help="simhash: blocks per fingerprint (default 6)")
    parser.add_argument(
        "--representative",
        choices=REPRESENTATIVE_RULES,
        help="which member represents a cluster (default smallest_id)",
    )
    parser.add_argument("--master", help="Spark master URL (default local[*]; spark-submit's wins)")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an OUTPUT that holds a finished run"
    )
    parser.add_argument(
        "--skip-corrupt",
        action="store_true",
        default=None,
        help="leave out unreadable Parquet files (listed in report.json) instead of exit 2",
    )
    parser.add_argument(
        "--no-report",
        action="store_true",
        help="do not write OUTPUT/report.html (figures and the largest clusters)",
    )
    parser.add_argument(
        "--index",
        metavar="DIR",
        help="nightly run: dedupe INPUT (the new documents) against the index at DIR (created "
        "when absent) and add it; OUTPUT gets the batch's clusters/, pairs/, changed_clusters/, "
        "deduplicated/ (minhash only; no report.html)",
    )
    parser.add_argument(
        "--index-buckets",
        type=int,
        metavar="N",
        help="buckets of a new index (default 32); an existing index keeps its own "
        "(`neardup index compact DIR --buckets N` changes it)",
    )


def config_from_args(args: argparse.Namespace) -> DedupeConfig:
    options = {
        "method": args.method,
        "id_col": args.id_col,
        "text_col": args.text_col,
        "ngram": args.ngram,
        "num_perm": args.num_perm,
        "threshold": args.threshold,
        "bands": args.bands,
        "rows": args.rows,
        "seed": args.seed,
        "representative": args.representative,
        "hamming_k": args.hamming_k,
        "blocks": args.blocks,
        "master": args.master,
        "skip_corrupt": args.skip_corrupt,
    }
    return build_config(args.config, args.overrides, options)


def summary_lines(report: dict[str, Any]) -> list[str]:
    counts = report["counts"]
    return [
        f"documents in      {counts['input_rows']:,}",
        f"clusters          {counts['clusters']:,}",
        f"duplicates removed {counts['removed']:,}",
        f"exact copies      {counts['exact_copies']:,}",
        f"near-dup pairs    {counts['near_pairs']:,} verified "
        f"of {counts['candidate_pairs']:,} candidates",
        f"wall time         {report['wall_seconds']:.1f} s "
        f"(+ {report.get('spark_start_seconds', 0):.1f} s Spark start-up)",
        f"throughput        {report['docs_per_second']:,.0f} docs/s",
        f"output            {report['output']}",
    ]


def cmd_dedupe(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if args.index:
        return _dedupe_indexed(args, config)
    if args.index_buckets is not None:
        raise UserError("--index-buckets needs --index DIR")

    from neardup_spark.pipeline import run
    from neardup_spark.session import build_session

    log.info("config: %s", config.to_dict())
    started = time.perf_counter()
    spark = build_session(config)
    spark_start = time.perf_counter() - started
    try:
        report = run(spark, args.input, args.output, config, overwrite=args.overwrite)
    finally:
        spark.stop()
    report["spark_start_seconds"] = round(spark_start, 2)
    print("\n".join(summary_lines(report)))
    if not args.no_report:
        from neardup_spark.report import write_report

        try:
            path = write_report(args.output, args.input)
        except Exception as exc:  # the run succeeded; a report problem must not fail it
            log.warning("report not written (%s); try `neardup report %s`", exc, args.output)
        else:
            print(f"report            {path}")
    return EXIT_OK


def _dedupe_indexed(args: argparse.Namespace, config: DedupeConfig) -> int:
    """``neardup dedupe NEW OUTPUT --index DIR``: an incremental run (no report.html)."""
    from neardup_spark.incremental import (
        check_incremental_config,
        incremental_summary_lines,
        run_incremental,
    )
    from neardup_spark.session import build_session

    config = check_incremental_config(config)  # unsupported settings: exit 2 before Spark starts
    log.info("config: %s", config.to_dict())
    started = time.perf_counter()
    spark = build_session(config)
    spark_start = time.perf_counter() - started
    try:
        report = run_incremental(
            spark,
            args.input,
            args.output,
            args.index,
            config,
            overwrite=args.overwrite,
            buckets=args.index_buckets,
        )
    finally:
        spark.stop()
    report["spark_start_seconds"] = round(spark_start, 2)
    print("\n".join(incremental_summary_lines(report)))
    return EXIT_OK


def index_info_lines(info: dict[str, Any]) -> list[str]:
    """What ``neardup index info DIR`` prints."""
    counts, settings = info["counts"], info["settings"]
    lines = [
        f"index             {info['index']}",
        f"version           {info['version']} (created {info['created_at']})",
        f"documents         {counts.get('documents', 0):,} in {counts.get('clusters', 0):,} "
        "clusters",
        f"contents          {counts.get('contents', 0):,} distinct texts stored",
        f"verified pairs    {counts.get('pairs', 0):,}",
        f"segments          {info['segments']} ({info['buckets']} buckets; "
        "`neardup index compact` merges them)",
        f"ids               {info['id_type']}",
        f"settings          num_perm {settings.get('num_perm')}, seed {settings.get('seed')}, "
        f"{settings.get('bands')} bands x {settings.get('rows')} rows, threshold "
        f"{settings.get('threshold')}, ngram {settings.get('ngram')}, shingle hash version "
        f"{settings.get('shingle_hash_version')}",
        f"batches           {len(info['batches'])}",
    ]
    for batch in info["batches"][-5:]:
        batch_counts = batch.get("counts", {})
        lines.append(
            f"  #{batch['seq']:<4} {batch['committed_at']}  run {batch['run_id']}  "
            f"{batch_counts.get('input_rows', 0):,} documents, "
            f"{batch_counts.get('deduplicated', 0):,} kept"
        )
    return lines


def cmd_index_info(args: argparse.Namespace) -> int:
    import json

    from neardup_spark.index import index_info, is_local

    if is_local(args.directory):
        info = index_info(None, args.directory)
    else:
        from neardup_spark.session import build_session

        spark = build_session(build_config(args.config, args.overrides, {"master": args.master}))
        try:
            info = index_info(spark, args.directory)
        finally:
            spark.stop()
    print(json.dumps(info, indent=2) if args.json else "\n".join(index_info_lines(info)))
    return EXIT_OK


def cmd_index_compact(args: argparse.Namespace) -> int:
    from neardup_spark.index import compact_index
    from neardup_spark.session import build_session

    if args.buckets is not None and args.buckets < 1:
        raise UserError(f"--buckets must be >= 1, got {args.buckets}")
    config = build_config(args.config, args.overrides, {"master": args.master})
    spark = build_session(config)
    try:
        summary = compact_index(spark, args.directory, buckets=args.buckets)
    finally:
        spark.stop()
    rows = summary["rows"]
    print(
        "\n".join(
            [
                f"index             {summary['index']}",
                f"version           {summary['version']}",
                f"segments          {summary['segments_before']} -> 1 "
                f"({summary['buckets']} buckets)",
                f"contents          {rows.get('contents', 0):,} kept "
                f"({summary['live_contents']:,} live)",
                f"band keys         {rows.get('bands', 0):,}",
                f"verified pairs    {rows.get('pairs', 0):,}",
                f"removed entries   {summary['deleted_entries']:,}",
            ]
        )
    )
    return EXIT_OK


def add_index_commands(parser: argparse.ArgumentParser) -> None:
    """``neardup index info|compact``."""
    sub = parser.add_subparsers(dest="index_command", required=True, parser_class=_Parser)

    def session_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--master", help="Spark master URL (default local[*])")
        p.add_argument("--config", action="append", default=[], metavar="FILE")
        p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides")

    info = sub.add_parser("info", help="version, settings, counts and batches of an index")
    info.add_argument("directory", help="the index directory (dedupe --index DIR)")
    info.add_argument("--json", action="store_true", help="print the summary as JSON")
    session_options(info)
    info.set_defaults(func=cmd_index_info)

    compact = sub.add_parser(
        "compact",
        help="rewrite the index into one segment, dropping texts no document holds any more",
    )
    compact.add_argument("directory", help="the index directory (dedupe --index DIR)")
    compact.add_argument(
        "--buckets", type=int, metavar="N", help="re-bucket the index (default: keep its own)"
    )
    session_options(compact)
    compact.set_defaults(func=cmd_index_compact)


def cmd_generate(args: argparse.Namespace) -> int:
    from neardup_spark.generate import write_corpus

    summary = write_corpus(
        args.directory,
        args.docs,
        seed=args.seed,
        mean_words=args.mean_words,
        overwrite=args.overwrite,
    )
    print(
        f"wrote {summary['docs']:,} documents to {args.directory}/corpus and "
        f"{summary['truth_pairs']:,} planted pairs to {args.directory}/truth"
    )
    return EXIT_OK


def fingerprint_lines(text: str, method: str, hash_name: str, config: DedupeConfig) -> list[str]:
    """What ``neardup fingerprint`` prints for one text."""
    import pyarrow as pa

    from neardup_spark.kernels.fingerprint import exact_fingerprint, to_hex
    from neardup_spark.kernels.minhash import MultiplyShiftFamily, signatures
    from neardup_spark.kernels.normalize import normalize_text
    from neardup_spark.kernels.shingles import shingle_sets
    from neardup_spark.kernels.simhash import simhash_text

    normalized = normalize_text(text, config.normalize) or ""
    if method == "exact":
        return [to_hex(exact_fingerprint(normalized))]
    if method == "simhash":
        if hash_name == "md5":  # the seed article's reference: MD5 of words, weight 1 each
            return [to_hex(simhash_text(text, "md5", "binary", options=config.normalize))]
        fp = simhash_text(
            text,
            "mmh3",
            config.simhash_weighting,  # type: ignore[arg-type]
            seed=config.seed,
            options=config.normalize,
        )
        return [to_hex(fp)]
    sets = shingle_sets(pa.array([normalized], pa.large_string()), config.ngram, config.seed)
    family = MultiplyShiftFamily.from_seed(config.num_perm, config.seed)
    sketch_values = signatures(sets.offsets, sets.hashes, family)[0]
    shown = " ".join(f"{v:08x}" for v in sketch_values[:8].tolist())
    return [
        f"shingles   {int(sets.sizes()[0])} distinct word {config.ngram}-shingles",
        f"sketch     {config.num_perm} MinHash values (seed {config.seed})",
        f"first 8    {shown}",
        f"banding    {config.bands} bands x {config.rows} rows",
    ]


def cmd_fingerprint(args: argparse.Namespace) -> int:
    config = build_config(args.config, args.overrides, {"ngram": args.ngram, "seed": args.seed})
    print("\n".join(fingerprint_lines(args.text, args.method, args.hash, config)))
    return EXIT_OK


def cmd_jvm_archive(args: argparse.Namespace) -> int:
    from neardup_spark import jvm_archive

    if jvm_archive.archive_path() is None:
        raise UserError(f"no archive: Java not found, or {jvm_archive.ARCHIVE_ENV}=off")
    path = jvm_archive.build(force=args.force)
    print(f"class archive: {path} ({path.stat().st_size / 2**20:.0f} MB)")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="neardup", description="Near-duplicate detection on Spark.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log each stage")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    dedupe = sub.add_parser("dedupe", help="find near-duplicate clusters in a Parquet corpus")
    add_dedupe_options(dedupe)
    dedupe.set_defaults(func=cmd_dedupe)

    index = sub.add_parser(
        "index", help="inspect (info) or compact the index of nightly runs (dedupe --index)"
    )
    add_index_commands(index)

    fp = sub.add_parser("fingerprint", help="print the fingerprint or sketch of one text")
    fp.add_argument("text", help="the text (quote it)")
    fp.add_argument("--method", choices=METHODS, default="simhash")
    fp.add_argument(
        "--hash",
        choices=("default", "md5"),
        default="default",
        help="simhash feature hash: default (seeded mmh3, words weighted by count) "
        "or md5 (the seed article's reference: MD5 of each word, weight 1)",
    )
    fp.add_argument("--ngram", type=int, help="words per shingle (minhash)")
    fp.add_argument("--seed", type=int, help="hash seed (simhash default hash, minhash)")
    fp.add_argument("--config", action="append", default=[], metavar="FILE")
    fp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides")
    fp.set_defaults(func=cmd_fingerprint)

    from neardup_spark.explain import add_arguments as add_explain_arguments
    from neardup_spark.explain import run_explain
    from neardup_spark.report import add_arguments as add_report_arguments
    from neardup_spark.report import run_report

    report = sub.add_parser(
        "report", help="write OUTPUT/report.html: figures and the largest clusters of a run"
    )
    add_report_arguments(report)
    report.set_defaults(func=run_report)

    explain = sub.add_parser(
        "explain", help="why the job would or would not pair two documents (same options)"
    )
    add_explain_arguments(explain)
    explain.set_defaults(func=run_explain)

    from neardup_spark.bench import add_arguments as add_bench_arguments
    from neardup_spark.bench import run_bench

    bench = sub.add_parser(
        "bench", help="benchmark against the hashing floor, Spark MLlib and datasketch"
    )
    add_bench_arguments(bench)
    bench.set_defaults(func=run_bench)

    from neardup_spark.ingest import add_arguments as add_ingest_arguments
    from neardup_spark.ingest import run_ingest

    ingest = sub.add_parser(
        "ingest", help="read WARC/WET files into the Parquet corpus dedupe reads"
    )
    add_ingest_arguments(ingest)
    ingest.set_defaults(func=run_ingest)

    from neardup_spark.evaluate import add_arguments as add_evaluate_arguments
    from neardup_spark.evaluate import run_evaluate

    evaluate = sub.add_parser(
        "evaluate", help="precision, recall and ARI of a run against planted truth or an oracle"
    )
    add_evaluate_arguments(evaluate)
    evaluate.set_defaults(func=run_evaluate)

    generate = sub.add_parser("generate", help="write a synthetic corpus with planted duplicates")
    generate.add_argument("directory", help="writes DIRECTORY/corpus and DIRECTORY/truth")
    generate.add_argument("--docs", type=int, default=5000, help="number of documents")
    generate.add_argument("--seed", type=int, default=0)
    generate.add_argument("--mean-words", type=int, default=500, help="mean document length")
    generate.add_argument("--overwrite", action="store_true")
    generate.set_defaults(func=cmd_generate)

    archive = sub.add_parser(
        "jvm-archive",
        help="pre-parse the classes a local run loads (one-off; faster local JVMs)",
    )
    archive.add_argument("--force", action="store_true", help="rebuild an existing archive")
    archive.set_defaults(func=cmd_jvm_archive)
    return parser


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command, mapping errors to exit codes."""
    try:
        return func(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_FAILURE
    except Exception:
        log.exception("the job failed")
        return EXIT_FAILURE


def configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # One parsable line per stage (stage=NAME rows=N seconds=S) even without --verbose.
    logging.getLogger("neardup_spark.progress").setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    configure_logging(args.verbose)
    return run_command(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
