"""ruff with the project's short rule set (pyproject.toml says why each rule is there), run with the suite, and the
rule that a ``# noqa`` says why: a silenced warning without a reason is a question nobody can answer later."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]
NOQA = re.compile(r"#\s*noqa(?P<rest>.*)$")
REASON = re.compile(r":\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*\s+-\s+\S")


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert "No module named ruff" not in result.stderr, "ruff is a test dependency: pip install -e '.[test]'"
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_noqa_names_its_rule_and_says_why():
    silent = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == Path(__file__).resolve() or any(part.startswith(".") or part == "build"
                                                   for part in path.relative_to(ROOT).parts):
            continue   # this file speaks of the comment without being one
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found = NOQA.search(line)
            if found and not REASON.match(found.group("rest")):
                silent.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert silent == [], "write '# noqa: RULE - why':\n" + "\n".join(silent)
