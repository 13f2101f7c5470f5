"""The import order the folder tree promises (common/__init__.py, docs/design.md §8), checked on files:

* a module imports only from its own folder or from folders below it (run_gateway.py, then daemon/, actors/,
  supervision/, runtime/, storage/, common/); inside actors/, the files of actors/ itself come first and every
  subfolder has a rank: it imports only from subfolders ranked below it, never from one of its own rank;
* a platform's folder (actors/adapters/<type>/) imports nothing of another platform's folder: what two platforms
  share is the kit's (docs/adapters.md);
* no two files import each other, directly or around a cycle, imports inside functions included;
* an import inside a function says why on its line or the line above (a run of such imports shares one comment);
* a file over LONG_FILE lines says why in its docstring, on a line starting "Long because:".

Read from the source with ``ast``; nothing is imported. Today's exceptions are listed below with the reason each
exists: a list that may only shrink (a test fails when one of them is gone, so that it is taken off)."""
from __future__ import annotations

import ast
import functools
import io
import tokenize
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
# Top to bottom. A folder may import from the folders after it, never from one before it.
# runtime/ (the seam to CPython's and Thespian's internals) sits below everything that runs on it.
LAYERS = ["run_gateway", "daemon", "actors", "supervision", "runtime", "storage", "common"]
# Inside actors/, top to bottom. A subfolder imports only from those of a later rank; two of one rank know nothing of
# each other (the agent clients and a profile's memory; plugins' hooks and media). "actors" is the files of actors/
# itself (the root, the watchdog, the sweeper, metrics, cron, ...), which may import any subfolder.
ACTORS_RANKS = [
    {"actors"},
    {"actors.console"},                      # the operator's console: reads what the admin CLI reads
    {"actors.sessions"},                     # the shards and their cells: they drive adapters and agents
    {"actors.scheduling"},                   # cron's schedules and jobs
    {"actors.adapters"},                     # the adapter kit and one folder per platform
    {"actors.profiles"},                     # routes and profiles: which persona, agent and tools a source gets
    {"actors.approvals"},                    # which tool calls wait for a yes; questions and answers (pure)
    {"actors.agents", "actors.memory"},      # the agent clients and their tools; a profile's memory
    {"actors.hooks", "actors.media"},        # plugins' hooks; media in and out
    {"actors.messages"},                     # the vocabulary every actor shares
]
# Imports against the ranks that exist today, each inside a function: the profiles validate the adapters' tables
# through the registry, and the registry imports the profiles (how each platform streams). Moving that validation
# up to the configuration check (actors/config_reload.py) would end both; never add to this list.
KNOWN_UPWARD = {
    ("actors/profiles/identities.py", "actors.adapters.registry"),
    ("actors/profiles/routes.py", "actors.adapters.registry"),
}
# File-level import cycles that exist today, each closed by an import inside a function (commented where it is).
KNOWN_CYCLES = [
    # The registry imports the profiles (profile_streams); validating identities needs the registry, and the profiles
    # load identities.
    {"actors.adapters.registry", "actors.profiles.identities", "actors.profiles.profiles"},
    # Database.open runs the migrations (schema.py) and opens inline connections (inline.py); both build on
    # db.py's Database, Migration and retry helpers.
    {"storage.db", "storage.inline", "storage.schema"},
    # The session store's export, import and move methods are in transfer.py and moving.py, which read the
    # session store's records and constants.
    {"storage.moving", "storage.sessions", "storage.transfer"},
]
LONG_FILE = 500


def product_files(root: Path = ROOT):
    for layer in LAYERS:
        if (root / f"{layer}.py").is_file():
            yield root / f"{layer}.py"
        if (root / layer).is_dir():
            yield from sorted((root / layer).rglob("*.py"))


def module_of(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _parents(tree: ast.AST) -> dict:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _enclosing(node: ast.AST, parents: dict, kinds) -> ast.AST | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, kinds):
            return node
    return None


def _type_checking_only(node: ast.AST, parents: dict) -> bool:
    branch = _enclosing(node, parents, ast.If)
    return branch is not None and "TYPE_CHECKING" in ast.unparse(branch.test)


def import_statements(path: Path, root: Path = ROOT) -> list:
    """``(node, names, in_function, type_checking_only)`` for each import of ``path``: the modules it names, relative
    imports resolved; ``from a.b import c`` names both ``a.b`` and ``a.b.c`` (which may be a module)."""
    return _import_statements(path, root, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=None)
def _import_statements(path: Path, root: Path, _version: int) -> list:
    found = []
    here = module_of(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = _parents(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        in_function = _enclosing(node, parents, (ast.FunctionDef, ast.AsyncFunctionDef)) is not None
        found.append((node, names, in_function, _type_checking_only(node, parents)))
    return found


# ------------------------------------------------------------------------------------------------- folder order

def layer_of(module: str) -> int | None:
    top = module.split(".")[0]
    return LAYERS.index(top) if top in LAYERS else None


def actors_group(module: str, root: Path = ROOT) -> str | None:
    """``actors.<sub>`` for a module of a subfolder of actors/, ``actors`` for the files of actors/ itself."""
    parts = module.split(".")
    if parts[0] != "actors" or len(parts) < 2:
        return None
    return f"actors.{parts[1]}" if (root / "actors" / parts[1]).is_dir() else "actors"


def actors_rank(group: str) -> int | None:
    return next((rank for rank, groups in enumerate(ACTORS_RANKS) if group in groups), None)


def upward_imports(root: Path = ROOT) -> list[str]:
    found = []
    for path in product_files(root):
        here, where = module_of(path, root), path.relative_to(root).as_posix()
        for node, names, _in_function, _typing in import_statements(path, root):
            known = any((where, name) in KNOWN_UPWARD for name in names)
            for target in names:
                mine, theirs = layer_of(here), layer_of(target)
                if theirs is not None and theirs < mine:
                    found.append(f"{where}:{node.lineno} imports {target} (a layer above)")
                    continue
                a, b = actors_group(here, root), actors_group(target, root)
                if a is None or b is None or a == b or known:
                    continue
                if actors_rank(a) is None or actors_rank(b) is None or actors_rank(b) <= actors_rank(a):
                    found.append(f"{where}:{node.lineno} imports {target} (across actors/ the wrong way)")
    return sorted(set(found))


def unranked_actors_folders(root: Path = ROOT) -> list[str]:
    folders = {f"actors.{p.parent.relative_to(root / 'actors').parts[0]}" for p in (root / "actors").rglob("*.py")
               if p.parent != root / "actors"}
    return sorted(folder for folder in folders if actors_rank(folder) is None)


def test_no_module_imports_from_a_folder_above_it():
    assert upward_imports() == []


def test_every_actors_subfolder_has_a_rank():
    assert unranked_actors_folders() == [], "add each to ACTORS_RANKS, where its imports put it"


def test_the_known_upward_imports_are_still_there():
    """The list only shrinks: an exception that is gone is taken off it."""
    present = {(path.relative_to(ROOT).as_posix(), target) for path in product_files()
               for _node, names, _f, _t in import_statements(path) for target in names}
    assert KNOWN_UPWARD - present == set()


# ------------------------------------------------------------------------------------------------- platform folders

def platform_folders(root: Path = ROOT) -> set[str]:
    """The platforms' folders: each subfolder of actors/adapters/ with a ``platform.py``, as the registry finds them."""
    return {path.parent.name for path in (root / "actors" / "adapters").glob("*/platform.py")}


def cross_platform_imports(root: Path = ROOT) -> list[str]:
    """Imports in one platform's folder from another's, imports inside functions included. A platform is one folder
    (docs/adapters.md): what two platforms share belongs to the kit, the files of actors/adapters/ itself."""
    platforms = platform_folders(root)
    found = []
    for platform in sorted(platforms):
        for path in sorted((root / "actors" / "adapters" / platform).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            for node, names, _in_function, _typing in import_statements(path, root):
                for target in names:
                    parts = target.split(".")
                    if parts[:2] == ["actors", "adapters"] and len(parts) > 2 and parts[2] in platforms - {platform}:
                        found.append(f"{where}:{node.lineno} imports from actors.adapters.{parts[2]}")
    return sorted(set(found))


def test_no_platform_imports_from_another_platforms_folder():
    assert cross_platform_imports() == [], "move what two platforms share into the kit (actors/adapters/*.py)"


# ------------------------------------------------------------------------------------------------- file cycles

def import_graph(root: Path = ROOT) -> dict[str, dict[str, str]]:
    """module -> {module it imports: "file:line" of the import}, between product files only, imports inside
    functions included (they run too), ``if TYPE_CHECKING:`` imports left out (they never run)."""
    files = {module_of(path, root): path for path in product_files(root)}
    graph: dict[str, dict[str, str]] = {module: {} for module in files}
    for module, path in files.items():
        for node, names, _in_function, typing_only in import_statements(path, root):
            if typing_only:
                continue
            if isinstance(node, ast.ImportFrom):   # ``from a import b``: module a.b, else a itself (b is a name)
                base, imported = names[0], names[1:]
                named = {name if name in files else base for name in imported}
            else:
                named = set(names)
            targets = set()
            for name in named:
                while name and name not in files:   # ``import a.b.c`` of a name that is not a file: its package
                    name = name.rpartition(".")[0]
                if name:
                    targets.add(name)
            for target in targets - {module}:
                graph[module].setdefault(target, f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return graph


def strongly_connected(graph: dict[str, dict[str, str]]) -> list[set[str]]:
    """Tarjan's components of more than one module: each holds at least one cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(start: str) -> None:
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return components


def one_cycle(graph: dict[str, dict[str, str]], component: set[str]) -> str:
    """A shortest cycle through the component's first module, with the file and line of each import."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(graph[module]):
                if target == start:
                    cycle = paths[module] + [start]
                    lines = [graph[a][b] for a, b in zip(cycle, cycle[1:])]
                    return f"{' -> '.join(cycle)} ({', '.join(lines)})"
                if target in component and target not in paths:
                    paths[target] = paths[module] + [target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def import_cycles(root: Path = ROOT) -> list[tuple[set[str], str]]:
    graph = import_graph(root)
    return [(component, one_cycle(graph, component)) for component in strongly_connected(graph)]


def test_no_import_cycle_between_files():
    new = [text for members, text in import_cycles() if members not in KNOWN_CYCLES]
    assert new == [], "import cycle between files: break it (an import inside a function does not)"


def test_the_known_cycles_are_still_there():
    """The list only shrinks: a cycle broken is taken off it (one that grew is reported above as a new one)."""
    found = [members for members, _text in import_cycles()]
    assert [sorted(known) for known in KNOWN_CYCLES if known not in found] == []


# -------------------------------------------------------------------------------- imports inside functions

def uncommented_function_imports(root: Path = ROOT) -> list[str]:
    """Imports inside functions with no comment on their lines or on the line above; a run of such imports on
    consecutive lines shares the comment of its first."""
    found = []
    for path in product_files(root):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        commented = {token.start[0] for token in tokenize.generate_tokens(io.StringIO(source).readline)
                     if token.type == tokenize.COMMENT}
        said: dict[int, bool] = {}        # last line of each import inside a function -> whether it says why
        inner = sorted((node for node, _names, in_function, _t in import_statements(path, root) if in_function),
                       key=lambda node: node.lineno)
        for node in inner:
            above = node.lineno - 1
            why = (any(line in commented for line in range(node.lineno, node.end_lineno + 1))
                   or (above >= 1 and lines[above - 1].lstrip().startswith("#")) or said.get(above, False))
            said[node.end_lineno] = why
            if not why:
                found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return found


def test_every_import_inside_a_function_says_why():
    assert uncommented_function_imports() == [], "say why on its line or the line above, or import it at the top"


# ------------------------------------------------------------------------------------------------- long files

def unexplained_long_files(root: Path = ROOT) -> list[str]:
    found = []
    for path in product_files(root):
        source = path.read_text(encoding="utf-8")
        if source.count("\n") <= LONG_FILE:
            continue
        docstring = ast.get_docstring(ast.parse(source)) or ""
        if not any(line.strip().lower().startswith("long because") for line in docstring.splitlines()):
            found.append(f"{path.relative_to(root).as_posix()} ({source.count(chr(10))} lines)")
    return found


def test_a_file_over_the_length_says_why():
    """Split by concept where a file holds two; where one concept needs the length, its docstring says so."""
    assert unexplained_long_files() == []


# ------------------------------------------------------------------------------------------------- the checks

def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for layer in LAYERS[1:]:
        (tmp_path / layer).mkdir()
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize("source, target", [("supervision/x.py", "actors.messages"),
                                            ("daemon/x.py", "run_gateway"),
                                            ("actors/adapters/x.py", "actors.sessions.chunking"),
                                            ("actors/sessions/x.py", "actors.metrics"),
                                            ("actors/agents/x.py", "actors.memory.scope"),
                                            ("actors/messages/x.py", "actors.media.names")])
def test_the_check_sees_an_upward_import(tmp_path, source, target):
    """An import the wrong way is reported: up a layer, up the ranks of actors/, or across one rank."""
    files = {source: f"import {target}\n"}
    for folder in ("actors/sessions", "actors/adapters", "actors/agents", "actors/memory", "actors/media"):
        files[f"{folder}/__init__.py"] = ""
    assert len(upward_imports(_tree(tmp_path, files))) == 1


def test_the_check_sees_an_import_from_another_platforms_folder(tmp_path):
    """Absolute, relative, of the package itself, inside a function: each is reported; the kit and the platform's
    own folder are not, nor a folder of actors/adapters/ that is no platform (no platform.py)."""
    root = _tree(tmp_path, {
        "actors/adapters/kit.py": "", "actors/adapters/shared/util.py": "",
        "actors/adapters/alpha/platform.py": "", "actors/adapters/alpha/auth.py": "",
        "actors/adapters/beta/platform.py": "",
        "actors/adapters/beta/inbound.py": ("from actors.adapters.alpha.auth import thing\n"
                                            "from ..alpha import auth\n"
                                            "from actors.adapters import alpha\n"
                                            "def later():\n    import actors.adapters.alpha.auth   # (why)\n"),
        "actors/adapters/beta/adapter.py": ("from actors.adapters.kit import x\n"
                                            "from actors.adapters.beta import inbound\n"
                                            "from .inbound import later\n"
                                            "from actors.adapters.shared.util import y\n")})
    reported = "actors/adapters/beta/inbound.py:{} imports from actors.adapters.alpha"
    assert cross_platform_imports(root) == [reported.format(line) for line in (1, 2, 3, 5)]


def test_the_check_sees_an_unranked_folder(tmp_path):
    root = _tree(tmp_path, {"actors/gadgets/x.py": "", "actors/sessions/y.py": "", "actors/root.py": ""})
    assert unranked_actors_folders(root) == ["actors.gadgets"]


def test_the_check_sees_a_cycle_through_an_import_inside_a_function(tmp_path):
    root = _tree(tmp_path, {
        "storage/__init__.py": "",
        "storage/a.py": "from storage.b import thing\n",
        "storage/b.py": "def thing():\n    from . import c   # (why)\n",
        "storage/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from storage import b\n"
                        "def more():\n    from storage.a import x   # (why)\n"})
    assert [text for _members, text in import_cycles(root)] == [
        "storage.a -> storage.b -> storage.c -> storage.a (storage/a.py:1, storage/b.py:2, storage/c.py:5)"]


def test_the_check_sees_an_import_inside_a_function_without_a_why(tmp_path):
    root = _tree(tmp_path, {"common/x.py": (
        "def a():\n    import json\n"                                  # reported
        "def b():\n    # why\n    import json\n    import csv\n"       # one comment covers the run
        "def c():\n    import json   # why\n"
        "def d():\n    import json\n\n    import csv   # why\n")})      # reported: line 10
    assert uncommented_function_imports(root) == ["common/x.py:2: import json", "common/x.py:10: import json"]


def test_the_check_sees_a_long_file_without_a_reason(tmp_path):
    body = "x = 1\n" * (LONG_FILE + 1)
    root = _tree(tmp_path, {"common/long.py": '"""A module."""\n' + body,
                            "common/said.py": '"""A module.\n\nLong because: one state machine.\n"""\n' + body,
                            "common/short.py": '"""A module."""\n' + "x = 1\n" * (LONG_FILE - 5)})
    assert unexplained_long_files(root) == [f"common/long.py ({LONG_FILE + 2} lines)"]
