"""``python -m tests.fakes.line --port P --state FILE [--config JSON]``: the fake as its own process."""
from tests.fakes.harness import standalone_main
from tests.fakes.line.server import FakeLine

if __name__ == "__main__":
    standalone_main(FakeLine)
