"""Microsoft Teams through the Bot Framework protocol (README.md beside this file). Imports nothing: the registry
reads platform.py, the adapter is imported only where one runs."""
