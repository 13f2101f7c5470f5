"""``python -m tests.fakes.feishu --port P --state FILE [--config JSON]``: the fake as its own process."""
from tests.fakes.feishu.server import FakeFeishu
from tests.fakes.harness import standalone_main

if __name__ == "__main__":
    standalone_main(FakeFeishu)
