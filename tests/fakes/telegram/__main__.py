"""``python -m tests.fakes.telegram --port P --state FILE [--config JSON]``: the fake as its own process."""
from tests.fakes.harness import standalone_main
from tests.fakes.telegram.server import FakeTelegram

if __name__ == "__main__":
    standalone_main(FakeTelegram)
