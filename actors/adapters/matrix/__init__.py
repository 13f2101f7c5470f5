"""The Matrix adapter: the client-server API, /sync intake, replies by transaction id (docs/matrix.md)."""
