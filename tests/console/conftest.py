"""The browser tests' fixtures: a Chromium context and a page (tests/webchat/browser.py)."""
from tests.webchat.browser import browser_context, page  # noqa: F401 - fixtures: pytest finds them here
