"""Signal through signal-cli's HTTP daemon (docs/signal.md)."""
