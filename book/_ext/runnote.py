"""Sphinx extension: every page says how to get the book's source and run it.

The repository is one setting, ``repository: url:`` in ``_config.yml``
(Jupyter Book hands it to the theme as ``repository_url``). Where it is
empty the note says so in words, with no link. The commands are the
README's own (its first two ``bash`` blocks), read at build time, so the
page and the README cannot drift apart.
"""
import html
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: A fenced ``bash`` block of the README.
_BASH = re.compile(r"```bash\n(.*?)\n```", re.DOTALL)


def readme_commands(readme=None):
    """The README's first two ``bash`` blocks: build the book, run the
    tests."""
    text = Path(readme or ROOT / "README.md").read_text()
    commands = [" ".join(block.split()) for block in _BASH.findall(text)]
    if len(commands) < 2:
        raise ValueError("README.md: expected two ```bash blocks (build "
                         "the book, run the tests)")
    return commands[:2]


def note_html(url, commands):
    """The note at the foot of every page: where the source is (``url``,
    or words saying that no public repository is named), and the
    README's two commands."""
    build, test = (html.escape(c) for c in commands)
    if url:
        where = (f'Get the book\'s source from <a class="reference external" '
                 f'href="{html.escape(url, quote=True)}">'
                 f"{html.escape(url)}</a>")
    else:
        where = ("This build names no public repository yet: get the "
                 "book's source from whoever gave you the book")
    return (
        '<div class="admonition note book-source">'
        '<p class="admonition-title">Run this book yourself</p>'
        f"<p>{where}. From its root (Python 3.11 or 3.12), build the book, "
        "which runs every lesson:</p>"
        f"<pre>{build}</pre><p>or run the tests:</p><pre>{test}</pre>"
        "<p>A lesson imports <code>src</code>, the package in "
        "<code>book/</code>: open the notebooks from <code>book/</code> "
        "(the README says how, and how to run on a GPU).</p></div>")


def add_note(app, pagename, templatename, context, doctree):
    if doctree is None or "body" not in context:
        return
    url = (app.config.html_theme_options or {}).get("repository_url", "")
    context["body"] += note_html(url, readme_commands())


def setup(app):
    app.connect("html-page-context", add_note)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
