"""``python -m tests.fakes.wecom --port P --state FILE [--config JSON]``: the fake as its own process."""
from tests.fakes.harness import standalone_main
from tests.fakes.wecom.server import FakeWeCom

if __name__ == "__main__":
    standalone_main(FakeWeCom)
