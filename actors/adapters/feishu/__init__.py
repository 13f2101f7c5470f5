"""Feishu / Lark through the open platform's IM API (README.md beside this file). Imports nothing: the registry
reads platform.py, the adapter is imported only where one runs."""
