"""``python -m tests.fakes.mattermost --port P --state FILE [--config JSON]``: the fake as its own process."""
from tests.fakes.harness import standalone_main
from tests.fakes.mattermost.server import FakeMattermost

if __name__ == "__main__":
    standalone_main(FakeMattermost)
