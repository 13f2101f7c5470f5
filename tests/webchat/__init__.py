"""The embedded web chat: protocol, server, the real daemon over WebSockets, and the page in headless Chromium."""
