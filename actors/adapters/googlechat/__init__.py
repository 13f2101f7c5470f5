"""Google Chat as a Chat app on an HTTP endpoint (README.md beside this file). Imports nothing: the registry reads
platform.py, the adapter is imported only where one runs."""
