"""The API reference page (book/api.md) lists every module of book/src."""
import re
from pathlib import Path

BOOK = Path(__file__).resolve().parents[1] / "book"
# The CPU device model mirrors CuPy's API, documented by CuPy itself.
NOT_DOCUMENTED = {"src.cpudevice"}


def src_modules(src=BOOK / "src"):
    """``src`` and its public modules and packages, by dotted name."""
    names = {"src"}
    for path in src.iterdir():
        if path.name.startswith(("_", ".")):
            continue
        if path.suffix == ".py" or (path / "__init__.py").is_file():
            names.add(f"src.{path.stem}")
    return names - NOT_DOCUMENTED


def listed_modules(page=BOOK / "api.md"):
    """The module names in the page's ``src-modules`` directive."""
    text = page.read_text(encoding="utf-8")
    block = re.search(r"^\.\. src-modules::\n\n((?:   \S+\n)+)", text,
                      re.MULTILINE)
    assert block, "book/api.md has no `.. src-modules::` list"
    return block.group(1).split()


def test_api_page_lists_every_src_module_once():
    listed = listed_modules()
    assert len(listed) == len(set(listed)), f"listed twice: {listed}"
    missing = sorted(src_modules() - set(listed))
    assert not missing, ("add one line per module to the src-modules list "
                         f"in book/api.md: {missing}")
    unknown = sorted(set(listed) - src_modules())
    assert not unknown, f"book/api.md lists missing modules: {unknown}"
