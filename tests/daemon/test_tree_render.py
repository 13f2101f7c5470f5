"""``tree``'s two faces: the plain lines (piped, what scripts read) and rich's drawing on a terminal, the same
actors and the same busiest cells in both, the rest counted on one line."""
from __future__ import annotations

import io
import re

from rich.console import Console

from daemon import cli_rich
from supervision import tree
from supervision.messages import TreeNode

NOW = 1_000_000.0


def shard_with_cells(cells: int) -> TreeNode:
    busy = cells - 1   # the last one: shown only because it is the busiest
    hosted = tuple(TreeNode("Session", f"session:{i:02d}", 7, "", "busy" if i == busy else "running", NOW - 60,
                            pending=5 if i == busy else 0) for i in range(cells))
    shard = TreeNode("SessionShard", "shard-0", 7, "ActorAddr-(T|:1)", "running", NOW - 90, children=hosted,
                     ref="shard", facts=(("cells", cells),))
    return TreeNode("Root", "root", 5, "ActorAddr-(T|:0)", "running", NOW - 3600, restarts=1, children=(shard,),
                    ref="root")


def test_the_plain_tree_shows_the_busiest_cells_and_counts_the_rest():
    lines = tree.render(shard_with_cells(tree.CELLS_SHOWN + 5), now=NOW).splitlines()
    assert lines[0] == "Root root  [running]  pid=5  up 1h00m  ActorAddr-(T|:0)  restarts=1"
    assert lines[1] == "└─ SessionShard shard-0  [running]  pid=7  up 1m30s  ActorAddr-(T|:1)  cells=25"
    assert lines[2] == "   ├─ Session session:00  [running]  pid=7  up 1m00s  "
    assert lines[-2] == "   ├─ Session session:24  [busy]  pid=7  up 1m00s    pending=5", "the busiest is shown"
    assert "session:19" not in "".join(lines) and len(lines) == 3 + tree.CELLS_SHOWN
    assert lines[-1] == "   └─ … 5 more cells (5 Session; `tree --all` lists every one)"
    assert len(tree.render(shard_with_cells(25), now=NOW, every_cell=True).splitlines()) == 2 + 25


def test_the_drawn_tree_has_the_same_nodes_with_guides():
    screen = io.StringIO()
    Console(file=screen, width=200, color_system=None).print(cli_rich.actor_tree(shard_with_cells(25), now=NOW))
    drawn = screen.getvalue().splitlines()
    assert drawn[0].split() == "Root root [running] pid=5 up 1h00m ActorAddr-(T|:0) restarts=1".split()
    assert re.match(r"└── SessionShard shard-0 +\[running\]", drawn[1]), drawn
    assert re.match(r" +├── Session session:00 +\[running\]", drawn[2]), drawn
    assert re.match(r" +├── Session session:24 +\[busy\].*pending=5", drawn[-2]), drawn
    assert len(drawn) == 3 + tree.CELLS_SHOWN and drawn[-1].strip() == \
        "└── … 5 more cells (5 Session; `tree --all` lists every one)"


def test_the_plain_tree_draws_middle_and_last_children_apart_and_times_as_ages():
    adapter = TreeNode("WebChatAdapter", "web", 9, "ActorAddr-(T|:3)", "running", NOW - 30, ref="web",
                       facts=(("connection", "connected"), ("since", NOW - 75.0)))
    adapters = TreeNode("AdapterSupervisor", "adapters", 8, "ActorAddr-(T|:2)", "running", NOW - 30,
                        children=(TreeNode("CliAdapter", "cli", 10, "ActorAddr-(T|:4)", "running", NOW - 30,
                                           ref="cli"), adapter), ref="adapters")
    sessions = TreeNode("SessionSupervisor", "sessions", 6, "ActorAddr-(T|:5)", "running", NOW - 30,
                        children=(TreeNode("SessionShard", "shard:0", 7, "ActorAddr-(T|:6)", "running", NOW - 30,
                                           ref="shard"),), ref="sessions")
    root = TreeNode("Root", "root", 5, "ActorAddr-(T|:0)", "running", NOW - 30, children=(sessions, adapters),
                    ref="root")
    lines = tree.render(root, now=NOW).splitlines()
    glyphs = [(guide := re.match(r"[│├└─ ]*", line).group(0), line[len(guide):].split()[0]) for line in lines]
    assert glyphs == [("", "Root"), ("├─ ", "SessionSupervisor"), ("│  └─ ", "SessionShard"),
                      ("└─ ", "AdapterSupervisor"), ("   ├─ ", "CliAdapter"), ("   └─ ", "WebChatAdapter")], lines
    assert "connection=connected since=1m15s ago" in tree.render(root, now=NOW)
