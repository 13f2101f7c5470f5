"""The import order the folder tree promises (common/__init__.py): a module imports only from its own folder or from
folders below it, lazy imports inside functions included. Read from the source with ``ast``; nothing is imported."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Top to bottom. A folder may import from the folders after it, never from one before it.
LAYERS = ["daemon", "actors", "supervision", "storage", "common"]
# Inside actors/: the session shards drive adapters and agents; adapters and agents know nothing of sessions or of
# each other; the subfolders share only the message vocabulary of actors/ (actors/messages/).
ACTORS_ORDER = ["actors.sessions", "actors.adapters", "actors.agents"]
SHARED_IN_ACTORS = {"actors.messages"}
MAX_LINES = 450


def product_files(root: Path = ROOT):
    for layer in LAYERS:
        yield from sorted((root / layer).rglob("*.py"))


def module_of(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            for alias in node.names:       # ``from actors.adapters import registry`` imports actors.adapters.registry
                yield node.lineno, f"{node.module}.{alias.name}"


def layer_of(module: str) -> int | None:
    top = module.split(".")[0]
    return LAYERS.index(top) if top in LAYERS else None


def actors_rank(module: str) -> int | None:
    """The rank of a module of actors/: 0 for the files of actors/ itself (root, watchdog, metrics, sweeper), then
    one per subfolder in ACTORS_ORDER; None for the shared vocabulary."""
    if module in SHARED_IN_ACTORS or not module.startswith("actors."):
        return None
    for rank, folder in enumerate(ACTORS_ORDER, start=1):
        if module == folder or module.startswith(folder + "."):
            return rank
    return 0 if module.count(".") == 1 else None


def upward_imports(root: Path = ROOT):
    found = []
    for path in product_files(root):
        here = module_of(path, root)
        for line, target in imported_modules(path):
            mine, theirs = layer_of(here), layer_of(target)
            if theirs is not None and theirs < mine:
                found.append(f"{path.relative_to(root)}:{line} imports {target} (a layer above)")
                continue
            a, b = actors_rank(here), actors_rank(target)
            if a is not None and b is not None and a != b and (b < a or (a > 0 and b > 0 and a != 1)):
                found.append(f"{path.relative_to(root)}:{line} imports {target} (across actors/ the wrong way)")
    return sorted(set(found))


def test_no_module_imports_from_a_folder_above_it():
    assert upward_imports() == []


def test_no_product_file_is_over_the_line_limit():
    long = [f"{p.relative_to(ROOT)} ({n})" for p in product_files()
            if (n := p.read_text(encoding="utf-8").count("\n")) > MAX_LINES]
    assert long == []


@pytest.mark.parametrize("source, target", [("supervision/x.py", "actors.messages"),
                                            ("actors/adapters/x.py", "actors.sessions.chunking"),
                                            ("actors/sessions/x.py", "actors.metrics")])
def test_the_check_sees_an_upward_import(tmp_path, source, target):
    """The checker itself: an import the wrong way is reported."""
    for layer in LAYERS:
        (tmp_path / layer).mkdir()
    (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / source).write_text(f"import {target}\n")
    assert len(upward_imports(tmp_path)) == 1
