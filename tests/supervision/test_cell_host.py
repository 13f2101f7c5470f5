"""The cell host without Thespian: mailboxes, serial handlers, timers, let-it-crash supervision from child specs, and
the shard map. The host's collaborators (what goes out, the wakeup) are plain callables here."""
from __future__ import annotations

import collections
import contextlib
import time

import pytest

from common.shard_map import shard_of
from supervision.cell import BridgeItem, Cell, CellAddress
from supervision.cell_host import CellHost
from supervision.spec import ChildSpec, Restart, SupervisorFlags

pytestmark = pytest.mark.timeout(30)
HERE = __name__


class Recorder(Cell):
    """Records what it handles; ("forward", address, message) sends on; "crash" raises; "stop" stops cleanly."""
    seen: list = []

    def on_start(self, args) -> None:
        Recorder.seen.append((self.name, "start", args))

    def on_str(self, message, sender) -> None:
        Recorder.seen.append((self.name, message, sender))
        if message == "crash":
            raise RuntimeError("broken on purpose")
        if message == "stop":
            self.stop_self(clean=True)
        if message == "later":
            self.after(0.0, "tick", "data")

    def on_tuple(self, message, sender) -> None:
        what, address, inner = message
        self.send(address, inner)
        if what == "forward, then crash":
            raise RuntimeError("crashed after sending")

    def on_timer_tick(self, data) -> None:
        Recorder.seen.append((self.name, "tick", data))

    def on_bridge(self, item) -> None:
        Recorder.seen.append((self.name, "bridge", item))
        if item == "stop":
            self.stop_self(clean=True)


class BridgedRecorder(Recorder):
    uses_bridge = True


class Rig:
    def __init__(self, max_restarts: int = 3):
        Recorder.seen = []
        self.out, self.parent_mail, self.exits, self.wakeups = [], [], [], []
        self.scopes: list[str] = []   # each handler's part of its group: "ok" when it returned, else the error
        self.commits = 0              # groups committed
        self.fail_next_commit = False
        self.host = CellHost("h1", send_out=lambda address, message, cell: self.out.append((address, message)),
                             arm=lambda seconds, token: self.wakeups.append((seconds, token)), on_parent=lambda m, s: self.parent_mail.append((m, s)),
                             on_exit=lambda state, abnormal, restarting: self.exits.append(
                                 (state.spec.name, abnormal, restarting)),
                             flags=SupervisorFlags(max_restarts=max_restarts, period_s=60.0, backoff_base_s=0.0,
                                                   backoff_max_s=0.0), atomic=self.scope)

    @contextlib.contextmanager
    def scope(self):
        """A group's transaction, as storage/inline.py's ``atomic`` gives it: parts that fail alone, a commit that
        may fail."""
        sent_before = len(self.out)
        yield self
        assert len(self.out) == sent_before, "nothing a handler sends leaves the host before its group commits"
        if self.fail_next_commit:
            self.fail_next_commit = False
            raise OSError("disk full at the commit")
        self.commits += 1

    @contextlib.contextmanager
    def part(self):
        try:
            yield
        except Exception as exc:
            self.scopes.append(type(exc).__name__)
            raise
        self.scopes.append("ok")

    def start(self, name: str, restart: Restart = Restart.TRANSIENT):
        return self.host.start(ChildSpec(name, f"{HERE}.Recorder", args={"n": name}, restart=restart))

    def settle(self) -> None:
        """Run mail and due timers until nothing is left (the shard does this after every message)."""
        for _ in range(100):
            self.host.fire_due()
            if not self.host.run():
                self.host.fire_due()
                if not self.host.run():
                    return

    def handled(self, name: str) -> list:
        return [what for cell, what, _ in Recorder.seen if cell == name]


def test_each_cell_handles_its_mail_in_order_one_message_at_a_time():
    rig = Rig()
    rig.start("a")
    rig.start("b")
    for i in range(3):
        rig.host.deliver("a", f"a{i}")
        rig.host.deliver("b", f"b{i}")
    rig.settle()
    assert rig.handled("a") == ["start", "a0", "a1", "a2"]
    assert rig.handled("b") == ["start", "b0", "b1", "b2"]
    # Interleaved across cells in arrival order, never two at once (the recorder would see a re-entry).
    order = [what for _, what, _ in Recorder.seen if what != "start"]
    assert order == ["a0", "b0", "a1", "b1", "a2", "b2"]


def test_a_message_sent_by_a_cell_is_queued_never_handled_inside_the_senders_handler():
    rig = Rig()
    a, b = rig.start("a"), rig.start("b")
    rig.settle()
    rig.host.deliver("a", ("forward", b.cell.myAddress, "hello from a"))
    rig.host.deliver("a", "after the forward")
    rig.settle()
    assert rig.handled("a")[-1] == "after the forward"
    assert ("b", "hello from a", a.cell.myAddress) in Recorder.seen
    # To the parent and out of the host: neither runs a cell's handler.
    rig.host.deliver("a", ("forward", rig.host.parent_address, "to the shard"))
    rig.host.deliver("a", ("forward", "thespian-address", "to an adapter"))
    rig.settle()
    assert rig.parent_mail == [("to the shard", a.cell.myAddress)]
    assert rig.out == [("thespian-address", "to an adapter")]


def test_a_crashing_transient_cell_restarts_fresh_and_mail_for_its_old_incarnation_is_dropped():
    rig = Rig()
    first = rig.start("s")
    rig.settle()
    old_address = first.cell.myAddress
    rig.host.deliver("s", "crash")
    rig.host.deliver("s", "lost with the crash")
    rig.settle()
    assert rig.exits == [("s", True, True)]
    assert rig.handled("s") == ["start", "crash", "start"], "restarted fresh, its queued mail gone with it"
    state = rig.host.cells["s"]
    assert state.restarts == 1 and "broken on purpose" in state.last_exit
    assert state.cell.myAddress != old_address and state.cell.myAddress.epoch == old_address.epoch + 1
    rig.start("o")
    rig.settle()
    rig.host.deliver("o", ("forward", old_address, "for the dead one"))
    rig.settle()
    assert "for the dead one" not in rig.handled("s")


def test_a_temporary_cell_is_not_restarted_and_a_clean_stop_is_not_a_crash():
    rig = Rig()
    rig.start("c", Restart.TEMPORARY)
    rig.start("t")
    rig.settle()
    rig.host.deliver("c", "crash")
    rig.host.deliver("t", "stop")
    rig.settle()
    assert ("c", True, False) in rig.exits and ("t", False, False) in rig.exits
    assert "c" not in rig.host.cells and "t" not in rig.host.cells
    assert rig.host.deliver("c", "anyone?") is False


def test_a_cell_that_keeps_crashing_is_left_stopped_and_its_host_carries_on():
    rig = Rig(max_restarts=2)
    rig.start("bad")
    rig.start("good")
    rig.settle()
    for _ in range(5):
        rig.host.deliver("bad", "crash")
        rig.settle()
    assert [e for e in rig.exits if e[0] == "bad"][-1] == ("bad", True, False), rig.exits
    assert "bad" not in rig.host.cells
    assert rig.handled("bad").count("start") == 3, "started once, restarted max_restarts times"
    rig.host.deliver("good", "still here")
    rig.settle()
    assert rig.handled("good")[-1] == "still here"


def test_timers_and_bridge_items_reach_only_the_incarnation_that_asked():
    rig = Rig()
    state = rig.start("s")
    rig.settle()
    rig.host.deliver("s", "later")
    rig.settle()
    assert ("s", "tick", "data") in Recorder.seen
    assert rig.wakeups, "the host asked for a wakeup"
    epoch = state.cell.myAddress.epoch
    rig.host.post(BridgeItem("s", epoch, "mine"))
    rig.host.post(BridgeItem("s", epoch - 1, "an earlier incarnation's"))
    rig.settle()
    assert rig.handled("s").count("bridge") == 1 and ("s", "bridge", "mine") in Recorder.seen


def test_a_coroutine_a_cell_submitted_with_a_tag_reports_back_to_that_cell():
    from supervision.bridge import AsyncBridge, TaskDone
    rig = Rig()
    bridge = rig.host.bridge = AsyncBridge("test")
    try:
        state = rig.host.start(ChildSpec("s", f"{HERE}.BridgedRecorder"))
        rig.settle()

        async def answer():
            return 42
        state.cell.bridge.submit(answer(), tag="asked").result(5)
        deadline = time.monotonic() + 5
        while not (items := bridge.drain()) and time.monotonic() < deadline:
            time.sleep(0.01)
        for item in items:
            rig.host.post(item)
        rig.settle()
        [done] = [item for cell, what, item in Recorder.seen if what == "bridge"]
        assert done == TaskDone("asked", result=42), done
    finally:
        bridge.close()


def test_a_timer_set_far_ahead_arms_one_wakeup_and_earlier_ones_arm_again():
    rig = Rig()
    state = rig.start("s")
    rig.settle()
    rig.wakeups.clear()
    state.cell.after(30.0, "tick")
    state.cell.after(40.0, "tick")
    state.cell.after(10.0, "tick")
    assert len(rig.wakeups) == 2 and rig.wakeups[1][0] <= 10.0, "the 40 s timer waits behind the 30 s wakeup"
    rig.host.fire_due()   # a stray wakeup: nothing is due yet, and the 10 s wakeup is still coming
    assert "tick" not in rig.handled("s") and len(rig.wakeups) == 2
    rig.host.fire_due(rig.wakeups[1][1])   # the 10 s wakeup came early: the earliest timer is asked for again
    assert len(rig.wakeups) == 3 and 0 < rig.wakeups[-1][0] <= 10.0


def test_wakeups_do_not_pile_up_while_cells_keep_setting_timers():
    """However many timers cells set, the host keeps only a few wakeups outstanding: they are Thespian's, kept in a
    list it sorts on every add, and a host that left one more behind each time one fired slowed to a halt."""
    rig = Rig()
    cells = [rig.start(f"s{i}").cell for i in range(50)]
    rig.settle()
    asked: list = []     # (when it is due, token): what a Thespian wakeup list would hold
    rig.host.timers._arm = lambda seconds, token: asked.append((time.monotonic() + seconds, token))
    most, set_, end = 0, 0, time.monotonic() + 0.3
    while time.monotonic() < end:
        cells[set_ % 50].after((set_ * 7 % 10) / 1000, "tick", set_)
        set_ += 1
        now = time.monotonic()
        for wakeup in sorted(w for w in asked if w[0] <= now):
            asked.remove(wakeup)
            rig.host.fire_due(wakeup[1])
            rig.host.run()
        most = max(most, len(asked))
    assert most <= 5, f"{most} wakeups outstanding at once"
    while asked:
        wakeup = min(asked)
        time.sleep(max(0.0, wakeup[0] - time.monotonic()))
        asked.remove(wakeup)
        rig.host.fire_due(wakeup[1])
        rig.host.run()
    assert sum(1 for _, what, _ in Recorder.seen if what == "tick") == set_, "every timer fired once"


def test_the_cell_address_names_host_cell_and_incarnation():
    address = CellAddress("h1", "session:k", 3)
    assert str(address) == "h1/session:k#3"
    assert address == CellAddress("h1", "session:k", 3) != CellAddress("h1", "session:k", 4)


def test_the_shard_map_is_stable_balanced_and_moves_few_keys_when_a_shard_is_added():
    keys = [f"default.telegram.dm.chat-{i}" for i in range(4000)]
    before = [shard_of(k, 4) for k in keys]
    assert before == [shard_of(k, 4) for k in keys], "the same in every call (and every process)"
    counts = collections.Counter(before)
    assert set(counts) == {0, 1, 2, 3} and min(counts.values()) > 800, counts
    after = [shard_of(k, 5) for k in keys]
    moved = sum(1 for b, a in zip(before, after) if a != b)
    assert all(a == 4 for b, a in zip(before, after) if a != b), "a key only ever moves to the new shard"
    assert 0.1 < moved / len(keys) < 0.3, moved
    assert {shard_of(k, 1) for k in keys} == {0}


def test_what_a_handler_sends_leaves_after_its_commit_and_not_at_all_if_it_crashes():
    rig = Rig()
    rig.start("a")
    rig.start("b")
    rig.settle()
    rig.scopes.clear()
    outside = object()
    rig.host.deliver("a", ("forward", outside, "fine"))
    rig.settle()
    assert rig.out == [(outside, "fine")] and rig.scopes == ["ok"]
    b = rig.host.address_of("b")
    rig.host.deliver("a", ("forward, then crash", outside, "never"))
    rig.host.deliver("a", ("forward, then crash", b, "never either"))
    rig.settle()
    assert rig.out == [(outside, "fine")], "a crashed handler's sends are dropped with its writes"
    assert "never either" not in rig.handled("b"), "mail to a cell of the same host too"
    assert rig.scopes[1] == "RuntimeError", rig.scopes


def test_bridge_items_that_arrive_together_are_one_handler_run_in_order_until_the_cell_stops():
    rig = Rig()
    state = rig.start("s")
    rig.settle()
    rig.scopes.clear()
    epoch = state.cell.myAddress.epoch
    for item in ("one", "two", "stop", "after the stop"):
        rig.host.post(BridgeItem("s", epoch, item))
    rig.settle()
    assert [item for cell, what, item in Recorder.seen if what == "bridge"] == ["one", "two", "stop"]
    assert rig.scopes == ["ok"], "one run, one transaction"
    assert ("s", False, False) in rig.exits


def test_the_handlers_of_one_run_commit_together_and_what_leaves_the_host_leaves_after_the_commit():
    rig = Rig()
    rig.start("a")
    b = rig.start("b")
    rig.settle()
    rig.commits, outside = 0, object()
    rig.host.deliver("a", ("forward", b.cell.myAddress, ("forward", outside, "b's answer")))
    rig.host.deliver("b", "b's own mail")
    rig.host.run()
    assert rig.commits == 1, "a's handler, b's own mail and b's handler of a's message: one transaction"
    assert rig.out == [(outside, "b's answer")]
    assert rig.handled("b") == ["start", "b's own mail"] and rig.scopes[-3:] == ["ok", "ok", "ok"]


def test_a_group_whose_commit_fails_restarts_every_cell_it_touched_and_sends_nothing():
    rig = Rig()
    rig.start("a")
    b, c = rig.start("b"), rig.start("c")
    rig.settle()
    outside, untouched = object(), c.cell
    # What a cell asks of its host (the shard starting a consumer for it) happens inside the group too.
    rig.host._on_parent = lambda message, sender: rig.start("spawned", Restart.TEMPORARY)
    rig.fail_next_commit = True
    rig.host.deliver("a", ("forward", b.cell.myAddress, "from a, never committed"))
    rig.host.deliver("a", ("forward", rig.host.parent_address, "spawn a consumer"))
    rig.host.deliver("a", ("forward", outside, "never leaves"))
    rig.host.run()
    assert rig.out == []
    assert sorted(name for name, abnormal, restarting in rig.exits if abnormal and restarting) == ["a", "b"]
    assert ("spawned", True, False) in rig.exits and "spawned" not in rig.host.cells, \
        "a cell started on the group's writes goes with them"
    assert rig.host.cells["c"].cell is untouched, "a cell the group never touched carries on"
    rig.settle()
    assert rig.handled("a")[-1] == "start", "restarted fresh"
    rig.host.deliver("a", ("forward", outside, "after the restart"))
    rig.settle()
    assert rig.out == [(outside, "after the restart")]


def test_a_group_is_cut_after_its_handler_count_so_the_write_lock_is_never_held_long():
    from supervision.cell_host import GROUP_HANDLERS
    rig = Rig()
    rig.start("a")
    rig.settle()
    rig.commits = 0
    for i in range(GROUP_HANDLERS * 2 + 1):
        rig.host.deliver("a", f"m{i}")
    rig.host.run()
    assert rig.commits == 3
