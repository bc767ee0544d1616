"""README.md and the pages of docs/ are a manual whose examples run and whose links resolve.

* Every ```python block runs on its own: a fresh interpreter, in an empty folder whose
  ``configs/`` is the repository's, with the repository on ``PYTHONPATH``; it must log no
  "eliminated by mistake" (a buffer call MindSpore dropped from a graph). A block whose fence
  follows the line ``<!-- no-run: reason -->`` (it needs msrun or a GPU) is only compiled.
  The README's blocks are in the fast tier; the pages' blocks are many and are marked slow.
* Every ```yaml block is a config ``create_buffer`` builds.
* README.md stays a front page: at most 200 lines.
* A manual states what is, not how it got there: no dates, issue numbers or run history
  (:func:`history_problems`; docs/changelog.md is exempt, and docs/benchmarks.md, rendered
  from recorded runs, may carry the dates of their provenance; the README's figures name
  their run by commit, and its date on that page).
* Links to files of the repository resolve, and so do their ``#anchors``.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
# The site's pages: generated API stubs and build output are not written by hand.
PAGES = sorted(path for path in DOCS.rglob("*.md")
               if not {"_build", "generated", "_templates"} & set(path.relative_to(DOCS).parts))
MANUAL = [README, *PAGES]
README_MAX_LINES = 200
NO_RUN = re.compile(r"^<!--\s*no-run:\s*\S.*-->$")
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    path: Path
    number: int  # 1-based, counted over the file's blocks of the same language
    line: int  # 1-based line of the opening fence
    language: str
    source: str
    no_run: bool

    @property
    def id(self) -> str:
        return f"{_name(self.path)}-{self.language}{self.number}-line{self.line}"


def code_blocks(path: Path) -> list[Block]:
    """The fenced blocks of ``path`` (backtick or tilde fences, nested longer fences kept whole)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    counts: dict[str, int] = {}
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence, language = match["fence"], match["info"].lower()
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines) and not re.match(rf"^ {{0,3}}{fence[0]}{{{len(fence)},}}\s*$", lines[index]):
            body.append(lines[index])
            index += 1
        index += 1
        counts[language] = counts.get(language, 0) + 1
        previous = lines[start - 1].strip() if start else ""
        blocks.append(Block(path, counts[language], start + 1, language, "\n".join(body) + "\n",
                            bool(NO_RUN.match(previous))))
    return blocks


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of the lines outside fenced blocks and HTML comments."""
    lines = path.read_text(encoding="utf-8").splitlines()
    inside = {line for block in code_blocks(path)
              for line in range(block.line, block.line + block.source.count("\n") + 2)}
    return [(number, text) for number, text in enumerate(lines, 1)
            if number not in inside and not text.strip().startswith("<!--")]


def _blocks(paths: list[Path], language: str) -> list[Block]:
    return [block for path in paths for block in code_blocks(path) if block.language == language]


README_PYTHON = _blocks([README], "python")
PAGES_PYTHON = _blocks(PAGES, "python")
YAML_BLOCKS = _blocks(MANUAL, "yaml")


def run_block(block: Block, tmp_path: Path) -> None:
    """Run one block as the manual promises: on its own, from an empty folder that sees configs/."""
    script = tmp_path / "example.py"
    script.write_text(block.source)
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                            env=env, timeout=300)
    where = f"{_name(block.path)}:{block.line} (python block {block.number})"
    assert result.returncode == 0, f"{where} failed:\n{block.source[:400]}\n{result.stderr[-3000:]}"
    assert "eliminated by mistake" not in result.stderr, f"{where}:\n{result.stderr[-3000:]}"


def test_the_manual_has_examples():
    assert len(README_PYTHON) >= 1, "README.md has no python example"
    assert PAGES and PAGES_PYTHON, "docs/ has no page with a python example"


@pytest.mark.parametrize("block", [b for b in README_PYTHON if not b.no_run], ids=lambda b: b.id)
def test_readme_example_runs_on_its_own(block, tmp_path):
    run_block(block, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in PAGES_PYTHON if not b.no_run], ids=lambda b: b.id)
def test_docs_example_runs_on_its_own(block, tmp_path):
    run_block(block, tmp_path)


@pytest.mark.parametrize("block", README_PYTHON + PAGES_PYTHON, ids=lambda b: b.id)
def test_every_example_compiles(block):
    # The fast tier's check of the guides' blocks, which run in the slow tier; and the only check
    # of a block marked no-run (it needs msrun or a GPU).
    compile(block.source, block.id, "exec")


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=lambda b: b.id)
def test_yaml_is_a_config_that_builds_its_buffer(block):
    from mindspore_rl_buffer import create_buffer

    config = yaml.safe_load(block.source)
    buffer = create_buffer(config["replay_buffer"])
    assert buffer.capacity > 0


def test_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; the front page keeps to {README_MAX_LINES}"


# --- No run history ------------------------------------------------------------------------

_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|December|"
           "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
DATES = [
    ("an ISO date", re.compile(r"\b(19|20)\d\d-[01]\d-[0-3]\d\b")),
    ("a date", re.compile(rf"\b({_MONTHS})\.? [0-3]?\d(st|nd|rd|th)?\b(,? (19|20)\d\d)?")),
    ("a date", re.compile(rf"\b[0-3]?\d(st|nd|rd|th)? (of )?({_MONTHS})\b")),
    ("a month and year", re.compile(rf"\b({_MONTHS}) (19|20)\d\d\b")),
]
# Run history, first person and the names of workplace tools. Each pattern is one that normal
# manual prose does not need ("before the first insert" passes; "before the X change" does not).
HISTORY = [
    ("an issue number", re.compile(r"(?<![\w&/#])#\d+\b")),
    ("history ('former')", re.compile(r"\bformer(ly)?\b", re.I)),
    ("history ('before the ... change')",
     re.compile(r"\b(before|after|since) the [\w`.\- ]{0,40}\b(change|fix|rewrite|refactor|switch)\b", re.I)),
    ("history ('no longer')", re.compile(r"\bno longer\b|\bnot any ?more\b|\banymore\b", re.I)),
    ("history ('previously')", re.compile(r"\bpreviously\b|\bused to (be|take|run|draw|copy|compile)\b", re.I)),
    ("history ('now')",
     re.compile(r"\bnow (also|longer)\b|\b(has|have) now\b|\bis now (the )?(default|faster|slower)\b", re.I)),
    ("history ('now compiles')", re.compile(r"\bnow (compiles|runs|takes|draws|copies|saves|loads|returns|"
                                            r"raises|uses|keeps|checks|refuses|accepts|costs|launches)\b", re.I)),
    ("a run of a log ('second run')",
     re.compile(r"\b(second|third|fourth|fifth|previous) (runs?|sessions?)\b|\bin (two|three|four|five|\d+) runs\b",
                re.I)),
    ("a run of a log ('tonight')", re.compile(r"\b(tonight|yesterday|last night|this morning|this evening|"
                                              r"earlier today|late that night|this stop|stop \d+)\b", re.I)),
    ("first person", re.compile(r"\b([Ww]e|[Oo]ur|[Oo]urs|us|[Ww]e've|[Ww]e're|[Ll]et's)\b")),
    ("first person ('I')", re.compile(r"(?<![\w/.\-])I(?=\s|'[a-z])")),
]
DATED_PAGES = {DOCS / "benchmarks.md"}  # generated from recorded runs: its provenance names dates
EXEMPT_PAGES = {DOCS / "changelog.md"}  # the changelog is history by design
_CODE_SPAN = re.compile(r"(`+).+?\1")
_LINK_TARGET = re.compile(r"\]\([^)]*\)|<https?://[^>]*>|https?://\S+")


def history_problems(path: Path, dates: bool = True) -> list[str]:
    """``file:line: found <what> '<text>'`` for each date, issue number or run-history phrase.

    Dates are looked for on every line (code blocks included); the phrases in the prose only,
    outside inline code and link targets (a URL's ``#anchor`` or a code comment is no issue
    number).
    """
    problems = []
    name = _name(path) if path.is_relative_to(ROOT) else str(path)
    if dates:
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for what, pattern in DATES:
                for match in pattern.finditer(text):
                    problems.append(f"{name}:{number}: found {what} {match.group(0)!r}")
    for number, text in prose_lines(path):
        text = _LINK_TARGET.sub("]", _CODE_SPAN.sub("``", text))
        for what, pattern in HISTORY:
            for match in pattern.finditer(text):
                problems.append(f"{name}:{number}: found {what} {match.group(0)!r}")
    return problems


@pytest.mark.parametrize("path", [p for p in MANUAL if p not in EXEMPT_PAGES], ids=_name)
def test_the_manual_states_what_is_not_its_history(path):
    problems = history_problems(path, dates=path not in DATED_PAGES)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("line", [
    "They take about 13-23 minutes (CI measured 792-1,120 s on 2026-11-25).",
    "Measured on Nov 26, 2026 and the 27th of November.",
    "This fixes #14, see the issue.",
    "The formerly separate buffer; before the fused-loop change it was slower.",
    "It no longer copies the columns; the writer is now also thread-safe.",
    "The direct sample now compiles without the indexes, 0.36x the time in two runs.",
    "In the second run, the third run and tonight's run it held.",
    "We measured it; our CPU; I think it works.",
])
def test_history_problems_catches_run_history(tmp_path, line):
    page = tmp_path / "page.md"
    page.write_text(f"# Page\n\n{line}\n")
    assert history_problems(page), line


@pytest.mark.parametrize("line", [
    "Call `set_context` before the first insert; the buffer keeps its state until `reset`.",
    "See [Seeding](guides/seeding.md#two-draws-in-one-graph) and `ops.insert` (`#12` in code).",
    "```python\n# step 2: sample\nprint('#3')\n```",
    "The writer I/O runs in a thread; a TensorSpec names a column. May the draws differ? No.",
    "Sample 128 items from the last 10,000 transitions; two runs with one seed draw the same.",
    "Insert three rows: the buffer is now full, and the first run compiles the graph.",
])
def test_history_problems_passes_manual_prose(tmp_path, line):
    page = tmp_path / "page.md"
    page.write_text(f"# Page\n\n{line}\n")
    assert not history_problems(page), history_problems(page)


# --- Links ---------------------------------------------------------------------------------

_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<target><[^>]*>|[^)\s]*)(?:\s+\"[^\"]*\")?\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\((?P<target>[^)\s]*)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(?P<target>\S+)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def links(path: Path) -> list[tuple[int, str]]:
    """``(line, target)`` of the inline, image and reference links in the prose of ``path``."""
    found = []
    for number, text in prose_lines(path):
        text = _CODE_SPAN.sub("``", text)
        for pattern in (_LINK, _IMAGE, _REFERENCE):
            found += [(number, match["target"].strip("<>")) for match in pattern.finditer(text)]
    return found


def slug(heading: str) -> str:
    """The anchor MyST gives a heading (``myst_heading_anchors``): GitHub's slug."""
    heading = re.sub(r"`([^`]*)`", r"\1", heading)
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    heading = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return heading.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The heading anchors of a Markdown file (repeated headings get ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    result = set()
    for _, text in prose_lines(path):
        match = _HEADING.match(text)
        if match and len(match[1]) <= 3:  # myst_heading_anchors = 3
            base = slug(match[2])
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f"{base}-{count}")
        result.update(re.findall(r"^\(([\w\-]+)\)=\s*$", text))  # MyST targets: (name)=
    return result


def link_problems(path: Path) -> list[str]:
    """``file:line: ...`` for each link to a file of the repository that does not resolve."""
    problems = []
    for number, target in links(path):
        where = f"{_name(path)}:{number}: link {target!r}"
        if re.match(r"^[a-z][a-z0-9+.\-]*:", target, re.I):  # https:, mailto:, ...
            if not re.match(r"^(https?|mailto):", target):
                problems.append(f"{where} has an unexpected scheme")
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            shown = destination.relative_to(ROOT) if destination.is_relative_to(ROOT) else destination
            problems.append(f"{where}: no file {shown}")
            continue
        if not destination.is_relative_to(ROOT):
            problems.append(f"{where} leaves the repository")
            continue
        if anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            problems.append(f"{where}: no heading with the anchor #{anchor} in {_name(destination)}")
    return problems


@pytest.mark.parametrize("path", MANUAL, ids=_name)
def test_links_to_the_repository_resolve(path):
    problems = link_problems(path)
    assert not problems, "\n".join(problems)


def test_readme_links_are_urls_or_files_of_the_repository():
    """The README is also read on PyPI and GitHub: relative links must name files that exist
    (the docs pages and the repository's files), everything else is an absolute URL."""
    for number, target in links(README):
        if re.match(r"^https?://", target):
            continue
        assert not target.startswith("#") or target[1:] in anchors(README), f"README.md:{number}: {target!r}"
        file_part = target.partition("#")[0]
        assert not file_part or (ROOT / file_part).is_file() or (ROOT / file_part).is_dir(), \
            f"README.md:{number}: {target!r} names no file of the repository"
