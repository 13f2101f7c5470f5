"""tests/README.md names the test files for each module: every file and folder it cites exists (paths are read from
tests/ or from the project root, a bare name from the folder of the path before it in the same cell)."""
from __future__ import annotations

import pytest

from tests.project.docs_text import ROOT, missing_paths

pytestmark = pytest.mark.timeout(30)


def test_every_path_the_tests_readme_cites_exists():
    text = (ROOT / "tests" / "README.md").read_text(encoding="utf-8")
    assert missing_paths(text, [ROOT / "tests", ROOT]) == []


def test_the_check_sees_a_path_that_is_gone(tmp_path):
    """The checker itself: a renamed test file, a bare name beside a real one and an empty glob are reported; a
    bare name in the folder of the path before it, a glob that matches and a URL are not."""
    (tmp_path / "storage").mkdir()
    (tmp_path / "storage" / "test_db.py").write_text("")
    text = ("| `storage/db.py` | `storage/test_db.py`, `test_gone.py`, `storage/test_*.py`, `/metrics` |\n"
            "| `x` | `storage/test_renamed.py`, `pipeline/*` |\n")
    assert missing_paths(text, [tmp_path]) == ["pipeline/*", "storage/db.py", "storage/test_renamed.py",
                                               "test_gone.py"]
