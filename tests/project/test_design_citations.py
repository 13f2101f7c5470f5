"""docs/design.md is the architecture the code cites: every citation of it, in any *.py or *.md file of the
project, names one of its section headings, and no file cites a design document that is not in the project."""
from __future__ import annotations

import re

import pytest

from tests.project.docs_text import ROOT, design_citations, design_sections, missing_paths, project_files

pytestmark = pytest.mark.timeout(30)
DESIGN = ROOT / "docs" / "design.md"
# The check and its helpers quote citations as examples, good and bad: they are not citations.
CHECKERS = {ROOT / "tests" / "project" / "test_design_citations.py", ROOT / "tests" / "project" / "docs_text.py"}


def unresolved_citations(root=ROOT, design_text: str | None = None) -> list[str]:
    sections = design_sections(DESIGN.read_text(encoding="utf-8") if design_text is None else design_text)
    found = []
    for path in project_files((".py", ".md"), root):
        if path in CHECKERS:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            cited = line
            if line.rstrip().rstrip("`").endswith("docs/design.md") and number < len(lines):
                cited += " " + lines[number].lstrip()   # ``docs/design.md\n§2.5``: the next line completes it
            for section in design_citations(cited if "docs/design.md" in line else ""):
                if section not in sections:
                    found.append(f"{path.relative_to(root)}:{number} cites docs/design.md §{section}, no such section")
            if re.search(r"(?<![\w/])DESIGN\.md", line):
                found.append(f"{path.relative_to(root)}:{number} cites DESIGN.md, which is not in the project "
                             "(the architecture is docs/design.md)")
    return found


def test_every_design_citation_names_a_section_of_docs_design_md():
    assert unresolved_citations() == []


def test_the_design_refers_only_to_its_own_sections():
    text = DESIGN.read_text(encoding="utf-8")
    sections = design_sections(text)
    assert {"1", "1.1", "2", "2.6", "3", "4", "9", "10"} <= sections
    referred = {first for first, _ in re.findall(r"§\s*([\d.]*\d)(?:-([\d.]*\d))?", text)}
    assert referred - sections == set()


def test_the_design_cites_only_files_that_exist():
    assert missing_paths(DESIGN.read_text(encoding="utf-8"), [ROOT]) == []


def test_the_readme_links_the_design():
    assert "](docs/design.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("line, sections", [
    ("(docs/design.md §2.6, G3)", ["2.6"]),
    ("the truth (docs/design.md §2.2-3).", ["2.2", "2.3"]),
    ("The guarantees of `docs/design.md` §3 and", ["3"]),
    ("(docs/design.md §2.2, §2.6, §2.7; guarantees", ["2.2", "2.6", "2.7"]),
    ("see docs/design.md for the tree", []),
])
def test_citations_are_read_as_written(line, sections):
    assert design_citations(line) == sections


def test_the_check_sees_a_dangling_citation(tmp_path):
    """The checker itself: a citation of a section that is not there, and one of the old DESIGN.md, are reported."""
    (tmp_path / "a.py").write_text('"""See docs/design.md §2.9 and DESIGN.md §1."""\n')
    (tmp_path / "b.md").write_text("Fine: docs/design.md §2.6.\n")
    found = unresolved_citations(tmp_path, "## 2. Turn\n### 2.6 Ledger\n")
    assert len(found) == 2 and "§2.9" in found[0] and "DESIGN.md" in found[1], found
