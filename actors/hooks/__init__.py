"""Plugins' hooks around the gateway's work: the events (events.py), which plugins run (plugins.py), the bounded
runner (runner.py) and the hook points as their call sites use them (points.py). docs/plugins.md."""
