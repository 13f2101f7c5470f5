"""``python -m tests.fakes.teams --port P --state FILE [--config JSON]``: the fake as its own process."""
from tests.fakes.harness import standalone_main
from tests.fakes.teams.server import FakeTeams

if __name__ == "__main__":
    standalone_main(FakeTeams)
