"""``python -m tests.fakes.discord --port P --state FILE [--config JSON]``: the fake as its own process."""
from tests.fakes.discord.server import FakeDiscord
from tests.fakes.harness import standalone_main

if __name__ == "__main__":
    standalone_main(FakeDiscord)
