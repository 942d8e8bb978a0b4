"""The architecture, checked by tools rather than by review: the import-linter contracts of
pyproject.toml (layers, what the dedupe run may import, pure kernels), and an AST scan of the
package (module and function sizes, private names used across modules, import cycles)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "neardup_spark"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imported(name: str, path: Path, tree: ast.Module, known: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports (``from x import y``: ``x.y`` when it is a module)."""
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                dest = sub if sub in known else target
                if dest in known and dest != name:
                    out.add(dest)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known and a.name != name}
    return out


def test_import_linter_contracts_are_kept():
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint), "--config", str(REPO / "pyproject.toml")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "BROKEN" not in done.stdout and "Contracts: 4 kept, 0 broken." in done.stdout


def test_no_module_over_600_lines():
    big = {
        name: n
        for name, path in modules().items()
        if (n := path.read_text().count("\n")) > MAX_MODULE_LINES
    }
    assert big == {}


def test_no_function_over_80_lines():
    long = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {lines}")
    assert long == []


def test_no_private_name_used_across_modules():
    known = modules()
    found = []
    for name, path in known.items():
        tree = ast.parse(path.read_text())
        bound = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("neardup_spark"):
                for alias in node.names:
                    private = alias.name.startswith("_") and not alias.name.startswith("__")
                    if private and f"{node.module}.{alias.name}" not in known:
                        found.append(f"{name} imports {node.module}.{alias.name}")
                    if f"{node.module}.{alias.name}" in known:
                        bound.add(alias.asname or alias.name)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{name} uses {node.value.id}.{node.attr}")
    assert found == []


def test_no_import_cycles():
    known = modules()
    edges = {
        name: imported(name, path, ast.parse(path.read_text()), known)
        for name, path in known.items()
    }
    # A package importing its own submodules (re-exports in __init__) is not a design cycle.
    graph: dict[str, set[str]] = defaultdict(set)
    for name, targets in edges.items():
        graph[name] = {t for t in targets if not t.startswith(name + ".")}
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


@pytest.mark.parametrize("job", ["dedupe.py", "ingest_warc.py"])
def test_jobs_are_thin_entry_points(job):
    """``jobs/*.py`` only hand their arguments to the command line's entry: no logic there."""
    tree = ast.parse((REPO / "jobs" / job).read_text())
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert [f.name for f in functions] == ["main"]
    assert len(functions[0].body) == 1 and "job_main" in ast.unparse(functions[0])


# What reaches the JVM: a classic session's SparkContext and its py4j gateway, RDDs, broadcast
# variables, accumulators. Spark Connect has none of them.
JVM_ATTRIBUTES = {"sparkContext", "_jvm", "_jsc", "_jsparkSession", "_jconf", "_jdf", "rdd"}
JVM_IMPORTS = {"SparkContext", "Broadcast", "Accumulator", "AccumulatorParam", "StatusTracker"}
# The classic side of the adapter, the classic-only file system, local-mode and tooling code.
JVM_ALLOWED = {
    "neardup_spark.runtime.engine",  # ClassicEngine: the one classic adapter
    "neardup_spark.runtime.spark_compat",  # Spark 3.5's Arrow shims (classic only)
    "neardup_spark.runtime.interrupts",  # the local JVM this process started
    "neardup_spark.runtime.worker_daemon",  # Spark's Python worker daemon (executors)
    "neardup_spark.io.hadoop_storage",  # Hadoop's file systems (classic sessions)
    "neardup_spark.bench.archive_build",  # builds a local JVM's class archive
}


def test_only_the_classic_adapter_reaches_the_jvm():
    """Everything a run over Spark Connect executes goes through runtime/engine.py for what
    differs; no other module touches the SparkContext, py4j, RDDs, broadcasts or accumulators
    (``make test-compat``'s Connect row runs the job where none of them exists)."""
    found = []
    for name, path in modules().items():
        if name in JVM_ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in JVM_ATTRIBUTES:
                found.append(f"{name}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module in ("pyspark", "py4j"):
                found += [
                    f"{name}:{node.lineno} imports {a.name}"
                    for a in node.names
                    if a.name in JVM_IMPORTS or node.module == "py4j"
                ]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("py4j"):
                found.append(f"{name}:{node.lineno} imports {node.module}")
    assert found == []


def test_the_module_map_lists_every_module():
    """docs/architecture.md's module map names every module of the package under its package,
    and nothing that is not one (a newcomer's map, kept true)."""
    text = (REPO / "docs" / "architecture.md").read_text()
    block = text.split("## Module map", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    listed, package = set(), ""
    for line in block.splitlines():
        name = line.split()[0] if line.strip() else ""
        if not name:
            continue
        if name.endswith("/") and not line.startswith(" "):
            package = name
        elif name.endswith(".py"):
            listed.add((package if line.startswith(" ") else "") + name)
    modules = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py"
    }
    assert modules - listed == set(), "modules missing from the map"
    assert listed - modules == set(), "the map names modules that do not exist"
