"""``python -m tests.fakes.whatsapp --port P --state FILE [--config JSON]``: the fake as its own process."""
from tests.fakes.harness import standalone_main
from tests.fakes.whatsapp.server import FakeWhatsApp

if __name__ == "__main__":
    standalone_main(FakeWhatsApp)
