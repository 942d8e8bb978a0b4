"""The documentation: the generated reference pages equal what the code generates now, the
getting-started page's commands run as written, the README's test command is CI's, and
``neardup --version`` is the package's version."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import neardup_spark
from neardup_spark.cli.app import main
from neardup_spark.cli.docs_reference import cli_reference, config_reference, pages

ROOT = Path(__file__).resolve().parents[1]
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
# A block preceded by this comment is shown, not run (it installs, or needs a real corpus).
SKIP_MARK = "<!-- test: skip"
# The page's corpus size, and the smaller one the test runs with.
PAGE_DOCS, TEST_DOCS = "--docs 5000", "--docs 300"
# Seconds a block may take (~30 s each on a quiet 2-core machine; a loaded one is far slower).
BLOCK_DEADLINE = 900


def bash_blocks(markdown: str) -> list[tuple[str, bool]]:
    """Each ```bash block of ``markdown``: (its text, whether it is marked to be skipped)."""
    blocks = []
    for match in re.finditer(r"^```bash\n(.*?)^```", markdown, flags=re.M | re.S):
        before = markdown[: match.start()].rstrip().splitlines()
        skipped = bool(before) and before[-1].startswith(SKIP_MARK)
        blocks.append((match.group(1), skipped))
    return blocks


def test_bash_blocks_and_their_skip_marks():
    page = "a\n<!-- test: skip (x) -->\n```bash\nmake demo\n```\ntext\n```bash\nls\nls -a\n```\n"
    assert bash_blocks(page) == [("make demo\n", True), ("ls\nls -a\n", False)]


def test_the_reference_pages_are_generated_from_the_code_as_it_is():
    """docs/reference/ is what `make docs` writes now: an option or setting added, removed or
    reworded without regenerating fails here."""
    for name, text in pages(ROOT / "conf" / "default.yaml").items():
        committed = (ROOT / "docs" / "reference" / name).read_text(encoding="utf-8")
        assert committed == text, f"docs/reference/{name} is stale: run make docs"


def test_the_cli_reference_lists_every_command_and_option():
    text = cli_reference()
    for heading in ("## `neardup dedupe`", "### `neardup index compact`", "## `neardup bench`"):
        assert heading in text
    for option in ("`--index DIR`", '`--prefer "COL [asc\\|desc], ..."`', "`--docs-out DIR`"):
        assert option in text
    assert "bench-row" not in text  # a child process's command, not listed by --help


def test_the_config_reference_has_every_setting_with_its_comment():
    text = config_reference(ROOT / "conf" / "default.yaml")
    threshold = "exact Jaccard (or containment) a verified pair must reach"
    assert f"| `threshold` | `float` | `0.8` | {threshold} |" in text
    assert "| `boilerplate.min_docs` | `int` | `5` |" in text
    assert "| `normalize.casefold` | `bool` | `true` | full Unicode case folding |" in text
    assert "| `arrow_batch_size` | `int` | `2000` |" in text


def test_the_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = bash_blocks(readme)[0][0]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()]
    assert commands == ["make demo", "make test"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "make test" in ci and ci.index("make test") < ci.index("make docs")
    assert len(readme.splitlines()) <= 250


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"neardup-spark {neardup_spark.__version__}\n"
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {neardup_spark.__version__} (" in changelog


def run_block(script: str, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """``script`` under ``bash -euo pipefail`` in its own process group (ended whole, JVMs
    included, if it outlives the deadline): exit code and stderr."""
    proc = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = proc.communicate(timeout=BLOCK_DEADLINE)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate()
        pytest.fail(f"{script} did not end within {BLOCK_DEADLINE} s\n{stderr[-3000:]}")
    return proc.returncode, stderr


@pytest.mark.slow
def test_the_getting_started_commands_run_as_written(tmp_path):
    """Every ```bash block of docs/getting-started.md not marked to be skipped, in order, in one
    clean directory, on a 300-document corpus instead of 5,000."""
    blocks = [text for text, skipped in bash_blocks(GETTING_STARTED.read_text()) if not skipped]
    assert len(blocks) >= 2 and any(PAGE_DOCS in text for text in blocks)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYSPARK_PYTHON": sys.executable,
    }
    started = time.perf_counter()
    for text in blocks:
        code, stderr = run_block(text.replace(PAGE_DOCS, TEST_DOCS), tmp_path, env)
        assert code == 0, f"{text}\nexit {code}\n{stderr[-3000:]}"
    assert (tmp_path / "out" / "demo" / "_SUCCESS").exists()
    assert (tmp_path / "out" / "strict" / "_SUCCESS").exists()
    print(f"getting-started commands: {time.perf_counter() - started:.1f} s")
