"""The Matrix adapter: the client-server API, /sync intake, replies by transaction id (actors/adapters/matrix/README.md)."""
