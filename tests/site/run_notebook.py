"""Execute one notebook with nbclient, cell by cell, in the current directory.

Usage: python run_notebook.py NOTEBOOK.ipynb CELL_TIMEOUT_S

Runs in its own process (started by test_downloads.py) so that the kernel, its event loop and a
timeout never share a process with the browser tests. On failure it prints one line of JSON
naming the failing cell, then exits 1.
"""

from __future__ import annotations

import json
import os
import sys

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

# The kernel must run in this environment: "python3" resolves to the kernelspec whose argv
# starts with "python", which jupyter_client replaces with sys.executable. A last, added cell
# checks it (a kernel from another environment would not have the project's packages).
CHECK_KERNEL = "import sys; print(sys.prefix)"


def main(path: str, cell_timeout: int) -> int:
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(CHECK_KERNEL))
    client = NotebookClient(
        nb,
        timeout=cell_timeout,
        kernel_name="python3",
        resources={"metadata": {"path": os.getcwd()}},
    )
    index = -1
    try:
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    client.execute_cell(cell, index)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        cell = nb.cells[index] if 0 <= index < len(nb.cells) else None
        print(
            json.dumps(
                {
                    "cell": index,
                    "cells": len(nb.cells) - 1,
                    "source": cell.source if cell is not None else "",
                    "error": type(exc).__name__,
                    "message": str(exc)[-4000:],
                }
            )
        )
        return 1
    outputs = nb.cells[-1].get("outputs", [])
    kernel_prefix = "".join(o.get("text", "") for o in outputs).strip()
    if os.path.realpath(kernel_prefix) != os.path.realpath(sys.prefix):
        print(
            json.dumps(
                {
                    "cell": None,
                    "cells": len(nb.cells) - 1,
                    "source": CHECK_KERNEL,
                    "error": "WrongKernel",
                    "message": f"the kernel ran in {kernel_prefix!r}, not in {sys.prefix!r}",
                }
            )
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
