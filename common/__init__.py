"""What every layer may import, and what imports nothing of the gateway: the configuration schema and loader
(``config``), logging and its redaction filter (``logging_setup``), the one rule for secrets in outgoing text
(``redact``), process identity and hygiene (``processes``) and the run files the daemon and the metrics actor share
(``runfiles``).

Import order, top to bottom (no folder imports from one above it; ``tests/project/test_layering.py`` checks it):
``run_gateway.py`` → ``daemon/`` → ``actors/`` → ``supervision/`` → ``runtime/`` → ``storage/`` → ``common/``.
"""
