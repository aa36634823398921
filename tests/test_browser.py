"""The built HTML book, checked in headless Chromium the way a reader sees it.

The test reads the site that ``jupyter-book build . -W --keep-going`` left in
``_build/html``; it never builds the book itself. It serves the site over
http on 127.0.0.1 from a thread (Sphinx's search needs http, not file://),
drives Debian's Chromium (``/usr/bin/chromium``) with Playwright, and opens
every page that ``_toc.yml`` lists, each as on a reader's first visit
(empty local storage). On each page: no console errors or uncaught
exceptions, every image rendered, no traceback outside cells tagged
``raises-exception``, a sidebar that links every page of the table of
contents, and download buttons that download. A search for a word from
each page's title finds that page, and a search for "pinned" finds the
pinned memory chapter. A full-page screenshot of every page goes to
``_build/screenshots/<page>.png`` (kept by CI as an artifact).

The page runs offline: requests that leave 127.0.0.1 (a CDN, say) get an
empty answer, so every error reported is the book's own, not the network's.

The tests are marked ``browser``: the default ``pytest`` run deselects them
(pytest.ini) and ``.ci/run`` runs them after the build with ``-m browser``.
Without a built book or without Chromium they skip, saying what is missing,
except under ``CI=true``, where they fail.
"""
import functools
import os
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest
import yaml

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-quic", "--no-first-run",
                 "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
PINNED_CHAPTER = "book/06_pinned_memory"
TIMEOUT_MS = 30_000
# Words a title search should not rest on (Sphinx ignores most of them).
STOPWORDS = {"about", "after", "and", "from", "into", "that", "the", "their",
             "then", "there", "these", "they", "this", "what", "when",
             "where", "which", "while", "with", "your"}


def toc_pages(toc=ROOT / "_toc.yml"):
    """The documents ``_toc.yml`` lists (root first), without suffixes."""
    data = yaml.safe_load(toc.read_text(encoding="utf-8"))
    pages = [data["root"]]

    def walk(entries):
        for entry in entries or ():
            if "glob" in entry:
                raise ValueError("_toc.yml uses glob; list the files")
            if "file" in entry:
                pages.append(str(PurePosixPath(entry["file"]).with_suffix("")))
            walk(entry.get("sections"))
    for part in data.get("parts") or [data]:
        walk(part.get("chapters"))
    return [str(PurePosixPath(p).with_suffix("")) for p in pages]


PAGES = toc_pages()


def numbered_pages(toc=ROOT / "_toc.yml"):
    """The documents in the numbered parts of ``_toc.yml``, a chapter's
    sections (chapter 5's) with it."""
    data = yaml.safe_load(toc.read_text(encoding="utf-8"))

    def walk(entries):
        for entry in entries or ():
            yield str(PurePosixPath(entry["file"]).with_suffix(""))
            yield from walk(entry.get("sections"))
    return {page for part in data.get("parts") or [] if part.get("numbered")
            for page in walk(part.get("chapters"))}


NUMBERED = numbered_pages()


def search_word(title):
    """The longest word of a page title (ties: the first), for a search."""
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z-]+", title)
             if len(w) >= 4 and w.lower() not in STOPWORDS]
    if not words:
        raise ValueError(f"no word to search for in the title {title!r}")
    return max(words, key=len)


def in_ci():
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def unavailable(why):
    """Skip, saying why, on a developer's machine; fail under CI=true."""
    if in_ci():
        pytest.fail(f"{why} (CI=true: the browser test must run in CI)")
    pytest.skip(why)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="session")
def site():
    """The base URL of ``_build/html``, served over http on 127.0.0.1."""
    if not (HTML / "index.html").is_file():
        unavailable(f"{HTML / 'index.html'} is missing: build the book first "
                    "with `jupyter-book build . -W --keep-going`")
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="session")
def browser(site, tmp_path_factory):
    """A Chromium context with a fresh profile; off-site requests stubbed."""
    if not Path(CHROMIUM).is_file():
        unavailable(f"{CHROMIUM} is missing: install Debian's Chromium with "
                    "`apt-get install chromium`")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright for Python is missing: "
                    "`pip install -r requirements.txt`")
    offsite = []

    def stub_offsite(route):
        url = route.request.url
        if url.startswith(site):
            route.continue_()
        else:
            offsite.append(url)
            route.fulfill(status=200, body="")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900})
        context.set_default_timeout(TIMEOUT_MS)
        # Every page is opened as on a reader's first visit to the site.
        context.add_init_script(
            "try { localStorage.clear(); sessionStorage.clear(); } "
            "catch (e) {}")
        context.route("**/*", stub_offsite)
        try:
            yield context
        finally:
            context.close()
    if offsite:
        print(f"\noff-site requests answered empty: {sorted(set(offsite))}")


def _page_url(site, docname):
    return urljoin(site, f"{docname}.html")


def _bare(url):
    """``url`` without its fragment and query, for comparing links."""
    return urldefrag(url)[0].split("?", 1)[0]


# JavaScript run in the page. Each returns plain data for the assertions.
_IMAGES_JS = """async () => {
  const images = Array.from(document.images);
  for (const img of images) img.loading = 'eager';
  await Promise.all(images.map(img => img.decode().catch(() => null)));
  return images.filter(img => !(img.naturalWidth > 0))
               .map(img => img.currentSrc || img.src || img.outerHTML);
}"""

_TRACEBACKS_JS = """() => {
  const found = [];
  const walker = document.createTreeWalker(document.body,
                                           NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!/\\bTraceback\\b/.test(node.textContent)) continue;
    if (el.closest('script, style, template, noscript')) continue;
    if (el.closest('.tag_raises-exception')) continue;
    const cell = el.closest('.cell');
    found.push((cell ? 'cell ' + (cell.id || cell.className) + ': '
                     : '') + node.textContent.trim().slice(0, 200));
  }
  return found;
}"""

_NAV_JS = """() => Array.from(
  document.querySelectorAll('nav.bd-docs-nav a[href]'), a => a.href)"""

_NAV_TEXT_JS = """() => Array.from(
  document.querySelectorAll('nav.bd-docs-nav a[href]'),
  a => a.textContent.trim())"""

# The first output of the page (a lesson's backend banner): how much wider
# its text is than the box that shows it (0 when every line fits).
_FIRST_OUTPUT_OVERFLOW_JS = """() => {
  const pre = document.querySelector('article .cell_output pre');
  return pre ? Math.max(0, pre.scrollWidth - pre.clientWidth) : 0;
}"""

# Every printed output on the page: those wider than their box (clipped
# or scrolled), by how much.
_OVERFLOWING_OUTPUTS_JS = """() => Array.from(
  document.querySelectorAll('article .cell_output pre'))
  .filter(pre => pre.scrollWidth - pre.clientWidth > 2)
  .map(pre => (pre.scrollWidth - pre.clientWidth) + ' px: '
              + pre.textContent.trim().slice(0, 80))"""

# The page's prose as a reader sees it: text outside code, outputs, maths
# and scripts (glued values included: they are prose once pasted).
_PROSE_JS = """() => {
  const parts = [];
  const root = document.querySelector('article') || document.body;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (el.closest('code, pre, script, style, .cell_input, .cell_output, '
                   + '.math, mjx-container, .MathJax, .book-source')) continue;
    parts.push(node.textContent);
  }
  return parts.join('');
}"""

# The note on how to get the book's source and run it, with its links.
_SOURCE_NOTE_JS = """() => {
  const note = document.querySelector('.book-source');
  return note ? {text: note.textContent,
                 links: Array.from(note.querySelectorAll('a[href]'),
                                   a => a.href)} : null;
}"""

_DOWNLOADS_JS = """() => Array.from(
  document.querySelectorAll('a.btn-download-source-button[href]'),
  a => a.href)"""


@pytest.fixture(scope="session")
def visit(site, browser):
    """``visit(docname)``: what a reader meets on the page (opened once)."""
    seen = {}

    def open_page(docname):
        if docname in seen:
            return seen[docname]
        page = browser.new_page()
        errors = []

        def on_console(msg):
            if msg.type == "error":
                errors.append(f"console.error: {msg.text} "
                              f"({msg.location.get('url')})")
        page.on("console", on_console)
        page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
        response = page.goto(_page_url(site, docname), wait_until="load")
        assert response is not None and response.ok, (
            f"{docname}.html: HTTP {response and response.status}; is the "
            "build older than _toc.yml? Rebuild the book.")
        broken = page.evaluate(_IMAGES_JS)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{Path(docname).name}.png"),
                        full_page=True)
        seen[docname] = {
            "title": page.locator("article h1").first.inner_text(),
            "errors": errors,
            "broken_images": broken,
            "tracebacks": page.evaluate(_TRACEBACKS_JS),
            "nav": {_bare(href) for href in page.evaluate(_NAV_JS)},
            "nav_text": page.evaluate(_NAV_TEXT_JS),
            "html_title": page.title(),
            "first_output_overflow": page.evaluate(
                _FIRST_OUTPUT_OVERFLOW_JS),
            "downloads": page.evaluate(_DOWNLOADS_JS),
            "overflowing": page.evaluate(_OVERFLOWING_OUTPUTS_JS),
            "prose": page.evaluate(_PROSE_JS),
            "source_note": page.evaluate(_SOURCE_NOTE_JS),
        }
        page.close()
        return seen[docname]
    return open_page


def search(browser, site, query):
    """The pages (bare URLs) Sphinx's search page finds for ``query``."""
    page = browser.new_page()
    try:
        page.goto(urljoin(site, f"search.html?q={query}"), wait_until="load")
        page.wait_for_function(
            "() => { const h = document.querySelector('#search-results h2');"
            " return h && h.textContent.startsWith('Search Results'); }")
        hrefs = page.evaluate(
            "() => Array.from(document.querySelectorAll("
            "'#search-results ul.search > li > a:first-of-type'),"
            " a => a.href)")
    finally:
        page.close()
    return {_bare(href) for href in hrefs}


def test_site_entry_redirects_to_a_page_whose_navigation_links_every_page(
        site, browser):
    page = browser.new_page()
    try:
        page.goto(urljoin(site, "index.html"))
        page.wait_for_selector("nav.bd-docs-nav")
        nav = {_bare(href) for href in page.evaluate(_NAV_JS)}
    finally:
        page.close()
    missing = [d for d in PAGES if _page_url(site, d) not in nav]
    assert not missing, f"index.html's navigation does not link {missing}"


@pytest.mark.parametrize("docname", PAGES)
def test_page_has_no_console_errors(visit, docname):
    assert visit(docname)["errors"] == []


@pytest.mark.parametrize("docname", PAGES)
def test_every_image_renders(visit, docname):
    assert visit(docname)["broken_images"] == []


@pytest.mark.parametrize("docname", PAGES)
def test_no_traceback_outside_raises_exception_cells(visit, docname):
    assert visit(docname)["tracebacks"] == []


@pytest.mark.parametrize("docname", PAGES)
def test_navigation_links_every_page(visit, site, docname):
    nav = visit(docname)["nav"]
    missing = [d for d in PAGES if _page_url(site, d) not in nav]
    assert not missing, f"the sidebar of {docname} does not link {missing}"


@pytest.mark.parametrize("docname", PAGES)
def test_download_buttons_download(visit, browser, docname):
    links = visit(docname)["downloads"]
    assert links, f"{docname} has no download button"
    for url in links:
        response = browser.request.get(url)
        assert response.ok and response.body(), f"{url}: {response.status}"
        assert urlsplit(url).path.endswith(
            (".ipynb", ".md")), f"unexpected download {url}"


@pytest.mark.parametrize("docname", PAGES)
def test_search_for_a_title_word_finds_the_page(visit, browser, site,
                                                docname):
    word = search_word(visit(docname)["title"])
    found = search(browser, site, word)
    assert _page_url(site, docname) in found, (
        f"searching {word!r} did not find {docname}: {sorted(found)}")


def test_search_for_pinned_finds_the_pinned_memory_chapter(browser, site):
    if PINNED_CHAPTER not in PAGES:
        pytest.skip(f"{PINNED_CHAPTER} is not in _toc.yml yet")
    found = search(browser, site, "pinned")
    assert _page_url(site, PINNED_CHAPTER) in found, sorted(found)



# "1. 1. Devices": a chapter number written twice, once by the numbered part
# of _toc.yml and once more by the notebook's own title.
_REPEATED_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)*)\.?\s+\1\.?\s")


@pytest.mark.parametrize("docname", PAGES)
def test_no_title_or_sidebar_entry_repeats_its_number(visit, docname):
    seen = visit(docname)
    texts = [seen["title"], seen["html_title"]] + seen["nav_text"]
    repeated = [t for t in texts if _REPEATED_NUMBER.match(t)]
    assert not repeated, f"{docname}: numbered twice: {repeated}"
    assert re.match(r"^\s*\d", seen["title"]) is None or docname in (
        NUMBERED), f"{docname}: its title starts with a number"


@pytest.mark.parametrize("docname", PAGES)
def test_the_first_output_fits_its_box(visit, docname):
    assert visit(docname)["first_output_overflow"] <= 2, (
        f"{docname}: the first output (the backend banner) is "
        f"{visit(docname)['first_output_overflow']} px wider than its box")


@pytest.mark.parametrize("docname", PAGES)
def test_no_printed_output_runs_past_its_box(visit, docname):
    """Printed lines wrap inside their box (chapter 7's were clipped at
    the right edge)."""
    assert not visit(docname)["overflowing"], (
        f"{docname}: {visit(docname)['overflowing']}")


#: A number read back as a Python tuple: "2,929" pasted as "(2, 929)".
_TUPLE_NUMBER = re.compile(r"\(\d{1,3}(?:, \d{3})+\)")


@pytest.mark.parametrize("docname", PAGES)
def test_prose_has_no_tuple_numbers_backticks_or_missing_references(
        visit, docname):
    """What glue pasted reads as prose: no number as a tuple, no literal
    backtick, and no "not captured" (a missing reference drops out of
    its sentence)."""
    prose = visit(docname)["prose"]
    assert not _TUPLE_NUMBER.findall(prose), (
        f"{docname}: {_TUPLE_NUMBER.findall(prose)}")
    ticks = [prose[max(0, m.start() - 40):m.end() + 40]
             for m in re.finditer("`", prose)]
    assert not ticks, f"{docname}: literal backticks: {ticks[:3]}"
    if docname in NUMBERED:          # a lesson (the reference pages may
        assert "not captured" not in prose, docname   # name the state)


def _repository_url():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    return (config.get("repository") or {}).get("url") or ""


@pytest.mark.parametrize("docname", PAGES)
def test_every_page_says_how_to_get_the_source_and_run_it(visit, docname):
    """The note at each page's foot gives the README's two commands and
    links the repository that _config.yml names, or says plainly that
    none is named, with no dead link."""
    note = visit(docname)["source_note"]
    assert note, f"{docname}: no note on how to run the book"
    assert "jupyter-book build . -W --keep-going" in note["text"]
    assert "python -m pytest" in note["text"]
    url = _repository_url()
    if url:
        assert url in note["links"], (docname, note["links"])
    else:
        assert note["links"] == [], (docname, note["links"])
        assert "no public repository" in note["text"]
