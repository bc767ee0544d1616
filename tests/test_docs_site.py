"""The documentation site builds without a warning, renders its navigation, and its links resolve.

The slow test builds the HTML with ``sphinx-build -W -n`` (or reads the folder named by
``MSRB_DOCS_HTML``, which CI builds once), opens pages in headless Chromium and checks the DOM
the browser rendered: furo's sidebar lists the guides, and every internal link of the page
names an existing file and, for a ``#fragment``, an element with that id. The fast test checks
that every page of docs/ is in a toctree.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# The pages a reader must reach from the sidebar.
GUIDES = ["getting-started", "guides/replay-buffer", "guides/in-your-graph", "guides/priority-and-reservoir",
          "guides/transition", "guides/trajectory", "guides/sharded", "guides/config-files",
          "guides/checkpoints", "guides/errors", "guides/seeding", "migrating/mindspore-rl",
          "migrating/tf-agents", "dqn", "platforms", "design", "benchmarks", "api/index", "changelog"]
# Pages whose rendered DOM is checked: the landing page, an API class page and the ops page.
CHECKED = ["index.html", "api/generated/mindspore_rl_buffer.ReplayBuffer.html", "api/ops.html"]


def pages() -> list[Path]:
    """The Markdown pages of the site (generated API stubs are .rst and are not listed)."""
    return sorted(path for path in DOCS.rglob("*.md")
                  if not {"_build", "generated", "_templates", "_ext", "_static"} & set(path.relative_to(DOCS).parts))


def toctree_entries() -> set[str]:
    """Every document named in a ``{toctree}`` of a page, as a path relative to docs/ without suffix."""
    entries = set()
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for body in re.findall(r"^(`{3,}|:{3,})\{toctree\}[^\n]*\n(.*?)^\1\s*$", text, re.S | re.M):
            for line in body[1].splitlines():
                line = line.strip()
                if not line or line.startswith(":"):
                    continue
                target = re.sub(r"^.*<(.*)>$", r"\1", line)  # "Title <page>" names page
                base = page.parent.relative_to(DOCS)
                entries.add(os.path.normpath(base / target).removesuffix(".md"))
    return entries


def test_every_page_is_in_a_toctree():
    listed = toctree_entries()
    orphans = [page.relative_to(DOCS).as_posix() for page in pages()
               if page.relative_to(DOCS).with_suffix("").as_posix() not in listed | {"index"}]
    assert not orphans, f"pages in no toctree (add them to docs/index.md or a section's toctree): {orphans}"
    missing = sorted(entry for entry in listed if not (DOCS / f"{entry}.md").is_file())
    assert not missing, f"toctree entries without a page: {missing}"


class _Dom(HTMLParser):
    """The ids and the links (with the classes of their enclosing elements) of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[tuple[str, tuple[str, ...]]] = []
        self._stack: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if attrs.get("name") and tag == "a":
            self.ids.add(attrs["name"])
        if tag == "a" and attrs.get("href") is not None:
            self.links.append((attrs["href"], tuple(cls for _, cls in self._stack)))
        if tag not in {"br", "img", "input", "link", "meta", "hr", "source", "wbr"}:
            self._stack.append((tag, attrs.get("class") or ""))

    def handle_endtag(self, tag):
        for index in range(len(self._stack) - 1, -1, -1):
            if self._stack[index][0] == tag:
                del self._stack[index:]
                break


def parse(html: str) -> _Dom:
    dom = _Dom()
    dom.feed(html)
    return dom


@pytest.fixture(scope="module")
def html_dir(tmp_path_factory) -> Path:
    """The built site: MSRB_DOCS_HTML if CI built it already, else a fresh ``sphinx-build -W -n``."""
    built = os.environ.get("MSRB_DOCS_HTML")
    if built:
        path = Path(built)
        assert (path / "index.html").is_file(), f"MSRB_DOCS_HTML={built} holds no index.html"
        return path
    pytest.importorskip("sphinx", reason="Sphinx is not installed: pip install -e '.[docs]'")
    pytest.importorskip("myst_parser", reason="myst-parser is not installed: pip install -e '.[docs]'")
    pytest.importorskip("furo", reason="furo is not installed: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("html")
    result = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-n", "--keep-going", "-q", "-b", "html",
                             str(DOCS), str(out)], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, f"sphinx-build failed:\n{result.stderr[-6000:]}"
    return out


def rendered(page: Path, profile: Path) -> str:
    """The DOM headless Chromium renders for ``page``, with no network and a throwaway profile."""
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=180)
    assert result.returncode == 0 and "<body" in result.stdout, f"chromium failed on {page}:\n{result.stderr[-2000:]}"
    return result.stdout


def _internal(href: str) -> bool:
    scheme = urlsplit(href).scheme
    return scheme in ("", "file") and not href.startswith("javascript:")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
@pytest.mark.parametrize("name", CHECKED)
def test_rendered_page_has_navigation_and_its_links_resolve(html_dir, tmp_path, name):
    page = html_dir / name
    assert page.is_file(), f"{name} was not built"
    dom = parse(rendered(page, tmp_path / "profile"))

    sidebar = {(page.parent / unquote(urlsplit(href).path)).resolve() for href, classes in dom.links
               if any("sidebar-tree" in cls.split() for cls in classes) and urlsplit(href).path}
    missing = [guide for guide in GUIDES if (html_dir / f"{guide}.html").resolve() not in sidebar]
    assert not missing, f"{name}: the sidebar does not link {missing}"

    targets: dict[Path, set[str]] = {}
    problems = []
    for href, _ in dom.links:
        if not _internal(href):
            continue
        parts = urlsplit(href)
        target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            problems.append(f"{href!r}: no file {target}")
            continue
        if parts.fragment and target.suffix == ".html":
            if target not in targets:
                targets[target] = dom.ids if target == page else parse(target.read_text(encoding="utf-8")).ids
            if unquote(parts.fragment) not in targets[target]:
                problems.append(f"{href!r}: no element with id {parts.fragment!r} in {target.name}")
    assert not problems, f"{name}:\n" + "\n".join(problems)


def autosummary_entries() -> set[str]:
    """The full names the ``autosummary`` directives of docs/api/ list (each gets its own page)."""
    names = set()
    for page in sorted((DOCS / "api").glob("*.md")):
        module = ""
        lines = page.read_text(encoding="utf-8").splitlines()
        inside = False
        for line in lines:
            match = re.match(r"^\.\. (current)?module:: (\S+)", line)
            if match:
                module = match[2]
            if line.startswith(".. autosummary::"):
                inside = True
                continue
            if inside and re.match(r"^   [A-Za-z_][\w.]*\s*$", line):
                names.add(f"{module}.{line.strip()}")
            elif inside and line.strip() and not line.startswith("   :"):
                inside = False
    return names


def test_api_reference_lists_every_public_name():
    import mindspore_rl_buffer.ops

    import mindspore_rl_buffer
    import mindspore_rl_buffer.apps.dqn

    listed = autosummary_entries()
    public = {f"{module.__name__}.{name}" for module in (mindspore_rl_buffer, mindspore_rl_buffer.ops,
                                                         mindspore_rl_buffer.apps.dqn)
              for name in module.__all__}
    missing = sorted(public - listed)
    assert not missing, f"public names without an API page (add them to docs/api/*.md): {missing}"
