"""``python -m tests.fakes.googlechat --port P --state FILE [--config JSON]``: the fake as its own process."""
from tests.fakes.googlechat.server import FakeGoogleChat
from tests.fakes.harness import standalone_main

if __name__ == "__main__":
    standalone_main(FakeGoogleChat)
