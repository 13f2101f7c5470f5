"""``python -m tests.fakes.slack --port P --state FILE [--config JSON]``: the fake as its own process."""
from tests.fakes.harness import standalone_main
from tests.fakes.slack.server import FakeSlack

if __name__ == "__main__":
    standalone_main(FakeSlack)
