"""The notebooks execute top to bottom in a kernel running this venv's Python, and are stored
without outputs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CELL_TIMEOUT = 600


def _kernel_manager(spec_root: Path) -> KernelManager:
    """A manager for a kernel named python3 whose command is THIS interpreter's ipykernel, from
    a kernel spec in a private directory (nothing is registered globally)."""
    spec_dir = spec_root / "python3"
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "neardup venv",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(kernel_dirs=[str(spec_root)], ensure_native_kernel=False)
    return KernelManager(kernel_name="python3", kernel_spec_manager=specs)


def execute(name: str, tmp_path: Path, env: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """Run ``notebooks/NAME.ipynb`` with ``tmp_path`` as working directory; returns the executed
    notebook. A cell that raises fails the test (nbclient raises CellExecutionError)."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    probe = nbformat.v4.new_code_cell("import sys; print(sys.executable)")
    nb.cells.insert(0, probe)
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        client = NotebookClient(
            nb,
            km=_kernel_manager(tmp_path / "kernels"),
            timeout=CELL_TIMEOUT,
            resources={"metadata": {"path": str(tmp_path)}},
        )
        client.execute()
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    printed = "".join(o.get("text", "") for o in nb.cells[0].outputs).strip()
    assert Path(printed).absolute() == Path(sys.executable).absolute(), printed
    return nb


@pytest.mark.parametrize("name", ["worked_examples", "explore_run"])
def test_notebooks_are_stored_without_outputs(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def test_worked_examples_notebook_executes(tmp_path: Path) -> None:
    nb = execute("worked_examples", tmp_path)
    images = [
        o
        for cell in nb.cells
        if cell.cell_type == "code"
        for o in cell.outputs
        if "image/png" in o.get("data", {})
    ]
    assert len(images) == 2  # both of the article's figures


@pytest.mark.slow
def test_explore_run_notebook_executes_on_a_fresh_sample_run(tmp_path: Path) -> None:
    env = {"NEARDUP_RUN_OUTPUT": "", "PYSPARK_PYTHON": sys.executable}
    nb = execute("explore_run", tmp_path, env)
    text = "".join(
        o.get("text", "") for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs
    )
    assert "report.html" in text
    assert "verdict" in text
