"""A reload's ConfigChanged as every actor takes it (supervision/behaviour.py): the newest generation wins, whatever
order Thespian delivers it in, and an actor derives its settings again only once it has started."""
from __future__ import annotations

from supervision.behaviour import Behaviour
from supervision.messages import ConfigChanged, Started


class Probe(Behaviour):
    myAddress = "probe"

    def __init__(self):
        super().__init__()
        self.started_on = None
        self.changes: list[tuple] = []

    def send(self, address, message) -> None:
        pass

    def on_start(self, args) -> None:
        self.started_on = self.config["_generation"]

    def on_config_changed(self, old: dict) -> None:
        self.changes.append((old["_generation"], self.config["_generation"]))


def config(generation: int) -> dict:
    return {"_generation": generation}


def test_a_newer_reload_replaces_the_configuration_an_older_one_arriving_late_does_not():
    probe = Probe()
    probe.handle(Started("probe", "Probe", None, config(1)), "parent")
    probe.handle(ConfigChanged(config(3)), "parent")
    probe.handle(ConfigChanged(config(2)), "parent")   # overtaken on the way
    probe.handle(ConfigChanged(config(3)), "parent")   # the same one again
    assert probe.config == config(3) and probe.changes == [(1, 3)]


def test_a_reload_that_overtakes_the_started_it_followed_is_kept():
    probe = Probe()
    probe.handle(ConfigChanged(config(2)), "parent")
    assert probe.changes == [], "nothing to derive again before the start"
    probe.handle(Started("probe", "Probe", None, config(1)), "parent")
    assert probe.started_on == 2 and probe.config == config(2)


def test_the_configuration_stays_out_of_the_messages_repr():
    assert "sk-" not in repr(ConfigChanged({"agent": {"api_key": "sk-secret-0123456789"}}))
