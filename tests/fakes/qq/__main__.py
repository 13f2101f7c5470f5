"""``python -m tests.fakes.qq --port P --state FILE [--config JSON]``: the fake as its own process."""
from tests.fakes.harness import standalone_main
from tests.fakes.qq.server import FakeQQ

if __name__ == "__main__":
    standalone_main(FakeQQ)
