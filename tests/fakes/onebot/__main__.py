"""``python -m tests.fakes.onebot --port P --state FILE [--config JSON]``: the fake as its own process."""
from tests.fakes.harness import standalone_main
from tests.fakes.onebot.server import FakeOneBot

if __name__ == "__main__":
    standalone_main(FakeOneBot)
