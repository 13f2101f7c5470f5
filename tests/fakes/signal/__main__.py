from tests.fakes.harness import standalone_main
from tests.fakes.signal.server import FakeSignalCli

if __name__ == "__main__":
    standalone_main(FakeSignalCli)
