"""Sphinx extension: emit every script of a page once.

Sphinx 7 (which Jupyter Book 1 requires) writes an inline script twice when
an extension adds it after the builder has started (sphinx-doc/sphinx#13402,
fixed in Sphinx 8.2). sphinx-thebe's ``const THEBE_JS_URL`` is such a
script, and its second copy is a SyntaxError on every page. This drops the
repeats from each page's ``script_files``, keeping the first of each.
"""


def _key(script):
    return (script.filename or "", script.priority,
            tuple(sorted(script.attributes.items())))


def drop_repeated_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        if _key(script) not in seen:
            seen.add(_key(script))
            unique.append(script)
    scripts[:] = unique


def setup(app):
    app.connect("html-page-context", drop_repeated_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
