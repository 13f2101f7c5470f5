"""The browser tests' fixtures (tests/webchat/browser.py): a gateway with the web chat, a Chromium context, a page."""
from tests.webchat.browser import browser_context, page  # noqa: F401 - fixtures: pytest finds them here
