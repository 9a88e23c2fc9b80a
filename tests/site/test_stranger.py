"""A reader who has never seen the project runs a notebook and a script from the served site.

What the reader has: a fresh virtual environment (``python -m venv``, no system site packages,
nothing of the project's ``.venv``) with Jupyter's kernel and client in it, and an empty
folder. What the reader does: download one notebook and one script over HTTP from the served
``build/html`` and run them. The notebook's own first cell must install torch, Matplotlib and
the ``attention`` package (the wheel, from the served site); the script is run after the
``pip install`` line of its header.

The site's address. The build writes it into every download (``ATTENTION_SITE_URL``, by default
``make serve``'s ``http://127.0.0.1:8000/``, which ``make test``'s build uses). This test
builds nothing and rewrites nothing: it reads the wheel's address from the notebook and serves
``build/html`` exactly there, on 127.0.0.1 at that port. If the port is taken (a ``make serve``
still running, say) the test fails and says so; a build made for another host (Read the Docs)
cannot be served here, and the test is skipped (failed under ``REQUIRE_BROWSER=1``).

Nothing leaves the machine. pip in the fresh environment is given only the package stores on
this machine that pip's own configuration names (``find-links`` folders and ``file://``
indexes), never an index on the network; torch is held to requirements.txt's pin (the build
the local wheel store holds), and pip's cache is off, so the wheel really comes from the served
site (the server's log is checked). Without a local store that holds ipykernel, or without
``venv``, the test is skipped with the reason (failed under ``REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pages  # tests/pages.py (on the path through conftest.py and sitecheck): runs a notebook
import pytest
import sitecheck
from test_downloads import tail

#: Short pages: the notebook's and the script's own run takes seconds; installing torch does not.
NOTEBOOK_PAGE = "03_self_attention"
SCRIPT_PAGE = "02_scaled_dot_product"
#: Seconds for one cell (the first installs torch) and for the whole test.
CELL_TIMEOUT = 600
TEST_TIMEOUT = 1500
JUPYTER = ("ipykernel", "nbclient", "nbformat")

#: Prints which of the page's packages the environment can import.
PROBE = (
    "import importlib.util as u; "
    "print([m for m in ('torch', 'matplotlib', 'attention') if u.find_spec(m)])"
)
#: Prints where pip took the installed package from (PEP 610's direct_url.json).
ORIGIN = (
    "import json; from importlib import metadata; "
    "d = metadata.distribution('attention-in-pytorch'); "
    "print(json.loads(d.read_text('direct_url.json'))['url'])"
)

_WHEEL_URL = re.compile(r"(https?://\S+/packages/\S+\.whl)")
_PIP_CONFIG = re.compile(r"^(?P<scope>[\w:.-]*)\.(?P<key>[\w-]+)='(?P<value>.*)'$")


def _unavailable(message: str) -> None:
    if sitecheck.REQUIRE_BROWSER:
        pytest.fail(f"{message} (REQUIRE_BROWSER=1: this test is required here)")
    pytest.skip(message)


def _download(site: Path, page: str, kind: str) -> sitecheck.Download:
    found = [d for d in sitecheck.tutorial_downloads(site) if d.id == f"{page}.{kind}"]
    assert found, f"the site offers no {page}.{kind}"
    return found[0]


def _local_sources(python: Path, env: dict[str, str]) -> dict[str, list[str]]:
    """The package stores on this machine that pip's configuration names."""
    out = subprocess.run(
        [str(python), "-m", "pip", "config", "list"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    sources: dict[str, list[str]] = {"find-links": [], "index-url": []}
    for line in out.splitlines():
        match = _PIP_CONFIG.match(line.strip())
        if not match:
            continue
        key = "index-url" if match["key"] in ("index-url", "extra-index-url") else match["key"]
        if key not in sources:
            continue
        for value in match["value"].split():
            local = value.startswith("file://") or (
                "://" not in value and Path(value).expanduser().exists()
            )
            if local and value not in sources[key]:
                sources[key].append(value)
    return sources


def _pinned_torch() -> str:
    text = (sitecheck.REPO_ROOT / "requirements.txt").read_text(encoding="utf-8")
    (pin,) = re.findall(r"^torch==\S+", text, flags=re.MULTILINE)
    return pin


def _stranger_env(python: Path, tmp: Path) -> dict[str, str]:
    """A reader's shell with pip limited to this machine's stores and Jupyter's paths fresh."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "PYTEST", "PIP_", "JUPYTER", "VIRTUAL_ENV", "IPYTHON"))
    }
    sources = _local_sources(python, base)
    constraints = tmp / "constraints.txt"
    constraints.write_text(_pinned_torch() + "\n", encoding="utf-8")
    env = {
        **base,
        "PATH": f"{python.parent}{os.pathsep}{base.get('PATH', '')}",
        "VIRTUAL_ENV": str(python.parent.parent),
        "PIP_CONSTRAINT": str(constraints),
        "PIP_NO_CACHE_DIR": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_FIND_LINKS": " ".join(sources["find-links"]),
        "JUPYTER_CONFIG_DIR": str(tmp / "jupyter" / "config"),
        "JUPYTER_DATA_DIR": str(tmp / "jupyter" / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "jupyter" / "runtime"),
        "IPYTHONDIR": str(tmp / "ipython"),
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(tmp / "matplotlib"),
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
    }
    if sources["index-url"]:
        env["PIP_INDEX_URL"] = sources["index-url"][0]
        env["PIP_EXTRA_INDEX_URL"] = " ".join(sources["index-url"][1:])
    else:
        env["PIP_NO_INDEX"] = "1"
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float):
    return subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _fetch(url: str, dest: Path) -> Path:
    with urllib.request.urlopen(url, timeout=30) as response:
        dest.write_bytes(response.read())
    return dest


@pytest.mark.timeout(TEST_TIMEOUT)
def test_a_stranger_runs_a_notebook_and_a_script_from_the_site(site_dir: Path, tmp_path: Path):
    notebook = _download(site_dir, NOTEBOOK_PAGE, "ipynb")
    script = _download(site_dir, SCRIPT_PAGE, "py")
    cells = json.loads(notebook.path.read_text(encoding="utf-8"))["cells"]
    first = "".join(cells[0]["source"])
    match = _WHEEL_URL.search(first)
    assert match, f"{notebook.id}'s first cell names no wheel:\n{first}"
    wheel_url = match.group(1)
    address = urlsplit(wheel_url)
    if address.hostname != "127.0.0.1" or not address.port:
        _unavailable(
            f"the site was built for {address.scheme}://{address.netloc}/, which cannot be "
            "served here: build with the default ATTENTION_SITE_URL (make test does)"
        )
    assert sitecheck.REPO_ROOT not in tmp_path.resolve().parents, "scratch inside the repo"

    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        _unavailable(f"`python -m venv` fails here: {tail(made.stderr, 5)}")
    python = venv / "bin" / "python"
    env = _stranger_env(python, tmp_path)
    jupyter = _run([str(python), "-m", "pip", "install", *JUPYTER], tmp_path, env, 600)
    if jupyter.returncode != 0:
        _unavailable(
            f"no package store on this machine holds {', '.join(JUPYTER)} for the fresh "
            f"environment (this test never installs from the network):\n{tail(jupyter.stderr)}"
        )
    seen = _run([str(python), "-c", PROBE], tmp_path, env, 60).stdout.strip()
    assert seen == "[]", f"the fresh environment already has {seen}"

    requests: list[str] = []
    with contextlib.ExitStack() as stack:
        try:
            base = stack.enter_context(
                sitecheck.serve(site_dir, port=address.port, requests=requests)
            )
        except OSError as exc:
            pytest.fail(
                f"cannot serve the site at 127.0.0.1:{address.port}, the address its downloads "
                f"name ({exc}): stop what listens there (a `make serve`?) and run again"
            )
        _run_notebook(python, env, base, site_dir, notebook, tmp_path / "reader")
        wheel_path = urlsplit(wheel_url).path
        assert f"GET {wheel_path} 200" in requests, (
            f"the notebook did not install the wheel from the site; the server saw {requests}"
        )
        origin = _run([str(python), "-c", ORIGIN], tmp_path, env, 60)
        assert origin.stdout.strip() == wheel_url, origin.stdout + origin.stderr
        _run_script(python, env, base, site_dir, script, tmp_path / "script-reader")
    assert all(r.endswith(" 200") for r in requests), requests


def _run_notebook(python, env, base, site_dir, notebook, reader: Path) -> None:
    """Download the notebook into the empty folder ``reader`` and run it with nbclient."""
    reader.mkdir()
    url = base + notebook.path.relative_to(site_dir).as_posix()
    path = _fetch(url, reader / notebook.path.name)
    # The one notebook runner (tests/pages.py), with the fresh environment's Python and kernel.
    cmd = [str(python), pages.__file__, "notebook", path.name, str(CELL_TIMEOUT)]
    ran = _run(cmd, reader, env, TEST_TIMEOUT - 300)
    if ran.returncode == 0:
        return
    try:
        failure = json.loads(ran.stdout.strip().splitlines()[-1])
        where = "the kernel check" if failure["cell"] is None else f"cell {failure['cell'] + 1}"
        message = f"{failure['error']}:\n{tail(failure['message'])}"
    except (ValueError, TypeError, KeyError, IndexError):
        where, message = "start", tail(ran.stdout + ran.stderr)
    pytest.fail(f"{notebook.id}, downloaded from {url}, failed at {where} ({message})")


def _run_script(python, env, base, site_dir, script, work: Path) -> None:
    """Download the script into the empty folder ``work``, run its header's pip line, run it."""
    work.mkdir()
    url = base + script.path.relative_to(site_dir).as_posix()
    path = _fetch(url, work / script.path.name)
    header = path.read_text(encoding="utf-8").split('"""', 1)[0]
    (install,) = re.findall(r"^#\s+(pip install .+)$", header, flags=re.MULTILINE)
    pip = _run([str(python), "-m", *shlex.split(install)], work, env, 600)
    assert pip.returncode == 0, f"`{install}` failed:\n{tail(pip.stdout + pip.stderr)}"
    run = _run([str(python), path.name], work, env, 300)
    assert run.returncode == 0, f"{script.id}, downloaded from {url}, failed:\n{tail(run.stderr)}"
