"""Signal through signal-cli's HTTP daemon (actors/adapters/signal/README.md)."""
