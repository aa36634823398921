"""Lessons opened in JupyterLab, the README's way, and run in Chromium.

A copy of ``book/`` (in a temporary folder, so that nothing JupyterLab or
a kernel writes reaches the checkout) is opened as the README says,
``.venv/bin/jupyter lab book/`` from the folder above it, on 127.0.0.1
with a token, no news and no autosave, every cell rendered
(``windowingMode: none``). Debian's Chromium (``/usr/bin/chromium``)
opens each lesson of `LESSONS`, runs all its cells once (Run > Run All
Cells) and then checks what a reader sees:

* every code cell ran, and no cell shows an error but those tagged
  ``raises-exception``;
* the prose, the rendered markdown cells and outputs and the bars of
  collapsed cells, holds no raw MyST (no ``{glue``, ``{eval``, ``:::{``),
  before the run (the stored run's numbers) and after it; and after it
  the cells that show the glued prose (``jupyterlab-prose``) show every
  number this run measured, none left waiting ("measured below").

Screenshots go to ``_build/screenshots/jupyterlab/`` (the top of the
lesson and its first glued sentences), and each Run All's seconds to
``_build/screenshots/jupyterlab/times.json``. ``JUPYTERLAB_LESSONS``
(names, space-separated, or ``all``) runs other lessons, to time every
Run All.

Marked ``browser``, beside tests/test_browser.py, but run on its own
(``.ci/run`` runs the two one after the other: Playwright's sync API
allows one at a time in a process, and each file holds its own): skipped
without Chromium or JupyterLab, except under ``CI=true``, where that
fails.
"""
import json
import os
import secrets
import shutil
import socket
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import subproc

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
SHOTS = ROOT / "_build" / "screenshots" / "jupyterlab"
CHROMIUM = "/usr/bin/chromium"
LESSONS = ["04_1_queueing", "05_2_overlap", "02_3_allocators"]
JUPYTER = Path(sys.executable).with_name("jupyter")
RAW_MYST = ("{glue", "{eval", ":::{")
LATER = "(measured below)"
RUN_TIMEOUT_S = 300

#: JupyterLab's settings for the test: no autosave (the copy is thrown
#: away anyway), every cell in the page, no news or update checks.
SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings":
        {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings":
        {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
}


def lessons():
    named = os.environ.get("JUPYTERLAB_LESSONS", "").split()
    if named == ["all"]:
        return sorted(p.stem for p in BOOK.glob("[0-9][0-9]_*.ipynb")) + [
            "misuse"]
    return named or LESSONS


def missing():
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if not JUPYTER.exists():
        return f"no JupyterLab beside {sys.executable}"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "no Playwright (pip install -r requirements.txt)"
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """``(url, token)`` of JupyterLab serving a copy of ``book/``."""
    why = missing()
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    top = tmp_path_factory.mktemp("lab")
    shutil.copytree(BOOK, top / "book", ignore=shutil.ignore_patterns(
        ".ipynb_checkpoints", "__pycache__", "_build"))
    settings = top / "settings"
    for name, value in SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(value))
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "BOOK_BACKEND": os.environ.get("BOOK_BACKEND",
                                                         "cpu"),
           "JUPYTERLAB_SETTINGS_DIR": str(settings),
           "JUPYTERLAB_WORKSPACES_DIR": str(top / "workspaces"),
           "JUPYTER_RUNTIME_DIR": str(top / "runtime")}
    argv = [str(JUPYTER), "lab", "book/", "--no-browser", "--ip=127.0.0.1",
            f"--port={port}", f"--IdentityProvider.token={token}",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class="
            "jupyterlab.NeverCheckForUpdate",
            *(["--allow-root"] if os.getuid() == 0 else [])]
    url = f"http://127.0.0.1:{port}"
    with subproc.server(argv, env=env, cwd=top, log=top / "lab.log") as proc:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}",
                                       timeout=5)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail("JupyterLab did not start:\n"
                                + (top / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield url, token


@pytest.fixture(scope="module")
def browser(lab):
    import asyncio
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass                        # no other Playwright in this process
    else:
        pytest.skip("another test file's Playwright holds this process "
                    "(Playwright's sync API allows one): run "
                    "tests/test_jupyterlab.py in a pytest run of its own, "
                    "as .ci/run does")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-sync"])
        yield chromium
        chromium.close()


#: The status of the open notebook's kernel.
KERNEL_JS = ("window.jupyterapp?.shell.currentWidget?.sessionContext"
             "?.session?.kernel?.status")

#: The open notebook's cells, as JupyterLab's model has them.
CELLS_JS = """() => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  return nb.widgets.map(c => ({
    type: c.model.type,
    count: c.model.type === 'code' ? c.model.executionCount : null,
    tags: c.model.getMetadata('tags') || [],
    errors: c.model.type === 'code' ? Array.from(
      {length: c.model.outputs.length}, (_, i) => c.model.outputs.get(i))
      .filter(o => o.type === 'error')
      .map(o => o.toJSON().ename + ': ' + o.toJSON().evalue) : [],
  }));
}"""

#: ``[source, shown]`` of each cell that shows glued prose: the book's
#: source (the cell above) and the Markdown it shows.
SHOWN_JS = """() => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  return nb.widgets.flatMap((c, i) => (c.model.getMetadata('tags') || [])
      .includes('jupyterlab-prose') ? [[
        nb.widgets[i - 1].model.sharedModel.getSource(),
        Array.from({length: c.model.outputs.length},
                   (_, k) => c.model.outputs.get(k).toJSON())
          .map(o => [].concat((o.data || {})['text/markdown'] || [])
                      .join('')).join('\\n')]] : []);
}"""

#: What the reader sees of the prose: rendered markdown, outputs and the
#: bars of collapsed cells (hidden elements have no innerText).
PROSE_JS = """() => {
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)'
                                     + ' .jp-Notebook');
  const parts = nb.querySelectorAll('.jp-MarkdownOutput, '
      + '.jp-RenderedMarkdown, .jp-OutputArea-output, .jp-Placeholder');
  return Array.from(parts).filter(e => e.checkVisibility())
    .map(e => e.innerText).join('\\n');
}"""


def run_all(page, url, token, name):
    """Open lesson ``name``, run all its cells, and return the seconds
    Run All took and the cells when it ended."""
    # a workspace of its own, reset: no tab (and kernel) of another lesson
    page.goto(f"{url}/lab/workspaces/{name}/tree/{name}.ipynb"
              f"?reset&token={token}")
    page.wait_for_function(f"() => {KERNEL_JS} === 'idle'",
                           timeout=120_000)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}-0-opened.png"))
    raw_myst(page.evaluate(PROSE_JS), f"{name}, before running")
    start = time.time()
    page.click("div.lm-MenuBar-itemLabel:text-is('Run')")
    page.click("li.lm-Menu-item:has-text('Run All Cells')")
    page.wait_for_function(
        f"() => {{ const cells = ({CELLS_JS})();"
        " const code = cells.filter(c => c.type === 'code');"
        f" return {KERNEL_JS} === 'idle'"
        " && code.every(c => c.count !== null); }",
        timeout=RUN_TIMEOUT_S * 1000, polling=250)
    seconds = time.time() - start
    return seconds, page.evaluate(CELLS_JS)


def raw_myst(prose, where):
    raw = [m for m in RAW_MYST if m in prose]
    assert not raw, f"{where}: raw MyST {raw} in what the reader sees: " \
        + "; ".join(line for line in prose.splitlines()
                    if any(m in line for m in RAW_MYST))[:2000]


def shoot(page, name):
    """The lesson's top and its first glued sentences, as screenshots."""
    page.evaluate(SCROLL_JS, -1)
    page.screenshot(path=str(SHOTS / f"{name}-1-top.png"))
    for k in range(3):
        if not page.evaluate(SCROLL_JS, k):
            break
        page.screenshot(path=str(SHOTS / f"{name}-{k + 2}-prose.png"))


#: Scroll to the ``k``-th cell that shows glued prose (from its collapsed
#: source's bar above it), or to the top for ``k`` < 0; false when the
#: lesson has no such cell.
SCROLL_JS = """(k) => {
  const panel = document.querySelector(
      '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
  if (k < 0) { panel.scrollTo(0, 0); return true; }
  const nb = window.jupyterapp.shell.currentWidget.content;
  const shown = nb.widgets.filter(c => (c.model.getMetadata('tags') || [])
      .includes('jupyterlab-prose'));
  if (k >= shown.length) return false;
  const i = nb.widgets.indexOf(shown[k]);
  const from = i > 0 && nb.widgets[i - 1].model.type === 'raw'
      ? nb.widgets[i - 1] : shown[k];
  panel.scrollTo(0, from.node.offsetTop - 40);
  return true;
}"""


@pytest.mark.parametrize("name", lessons())
def test_a_lesson_runs_and_reads_in_jupyterlab(lab, browser, name):
    url, token = lab
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        seconds, cells = run_all(page, url, token, name)
        times = SHOTS / "times.json"
        found = json.loads(times.read_text()) if times.exists() else {}
        found[name] = round(seconds, 1)
        times.write_text(json.dumps(found, indent=1, sort_keys=True))
        shoot(page, name)
        errors = [(i, c["errors"]) for i, c in enumerate(cells)
                  if c["errors"] and "raises-exception" not in c["tags"]]
        assert not errors, f"{name}: unexpected errors {errors}"
        prose = page.evaluate(PROSE_JS)
        raw_myst(prose, name)
        for source, shown in page.evaluate(SHOWN_JS):
            assert shown.count(LATER) == source.count(LATER), (
                f"{name}: a number left unfilled: {shown[:2000]}")
        shown = [c for c in cells if "jupyterlab-prose" in c["tags"]]
        assert shown, f"{name}: no cell shows its glued prose"
    finally:
        # one kernel at a time: each lesson's model holds memory
        page.evaluate("() => window.jupyterapp?.shell.currentWidget"
                      "?.sessionContext?.shutdown()")
        page.close()
