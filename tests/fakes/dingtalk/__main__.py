"""``python -m tests.fakes.dingtalk --port P --state FILE [--config JSON]``: the fake as its own process."""
from tests.fakes.dingtalk.server import FakeDingTalk
from tests.fakes.harness import standalone_main

if __name__ == "__main__":
    standalone_main(FakeDingTalk)
