"""Reading the project's own documents for the tests of tests/project/: the files a document cites, the sections of
docs/design.md and the citations of them. Pure functions over text and the file tree; nothing is imported."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_PARTS = {".git", "__pycache__", ".venv", "build", "dist", ".hypothesis", ".pytest_cache", "state"}
PATH_ENDINGS = (".py", ".md", ".toml", ".cfg", ".json", ".png", ".csv", ".service", "/")
# `docs/design.md §2.6`, `docs/design.md` §3, `docs/design.md §2.2-3` (a range: 2.2 to 2.3), `§2.2, §2.6`.
CITATION = re.compile(r"docs/design\.md`?\s*((?:§\s*[\d.]*\d(?:-[\d.]*\d)?(?:,\s*)?)+)")
SECTION = re.compile(r"§\s*([\d.]*\d)(?:-([\d.]*\d))?")
HEADING = re.compile(r"^#+\s+(\d+(?:\.\d+)*)\.?\s", re.MULTILINE)


def project_files(suffixes: tuple[str, ...], root: Path = ROOT):
    for path in sorted(root.rglob("*")):
        if path.suffix in suffixes and path.is_file() and not SKIPPED_PARTS & set(path.relative_to(root).parts):
            yield path


def _units(text: str):
    """The scopes a bare file name is read in (``chunking.py`` after ``actors/sessions/turn.py`` is in
    actors/sessions/): a table's cells one by one, else a whole paragraph."""
    for paragraph in re.split(r"\n\s*\n", text):
        if paragraph.lstrip().startswith("|"):
            for line in paragraph.splitlines():
                yield from line.split("|")
        else:
            yield paragraph


def cited_paths(text: str):
    """Each file or folder a document names in backticks, as written: the first word of the quote, before any
    ``:`` (``tests/x.py::test_y``, ``tests/actor_system.py: wait_for``). URLs, placeholders (``<type>``), commands
    and dotted names are no paths."""
    for unit in _units(text):
        found = []
        for quoted in re.findall(r"`([^`]+)`", unit):
            word = quoted.split()[0].split(":")[0] if quoted.split() else ""
            if re.fullmatch(r"[\w.*-]+(/[\w.*-]+)*/?", word) and ("/" in word or word.endswith(PATH_ENDINGS)):
                found.append(word)
        yield found


def missing_paths(text: str, bases: list[Path]) -> list[str]:
    """The paths ``text`` cites that name nothing: each is looked for under every base, then (a bare name) in the
    folder of the path cited before it in the same cell or paragraph. A glob must match at least one file."""
    missing = []
    for words in cited_paths(text):
        previous: Path | None = None
        for word in words:
            here = None
            for base in bases + ([previous] if previous else []):
                matches = sorted(base.glob(word.rstrip("/"))) if "*" in word else [base / word]
                if matches and matches[0].exists():
                    here = matches[0]
                    break
            if here is None:
                missing.append(word)
            else:
                previous = here if here.is_dir() else here.parent
    return sorted(set(missing))


def design_sections(text: str) -> set[str]:
    """The numbers of docs/design.md's headings: ``## 2. One turn`` is 2, ``### 2.6 The reply ...`` is 2.6."""
    return set(HEADING.findall(text))


def design_citations(text: str) -> list[str]:
    """The sections ``text`` cites of docs/design.md; a range ``2.2-3`` cites both ends (2.2 and 2.3)."""
    cited = []
    for group in CITATION.findall(text):
        for first, last in SECTION.findall(group):
            cited.append(first)
            if last:
                cited.append(last if "." in last or "." not in first else f"{first.rsplit('.', 1)[0]}.{last}")
    return cited
