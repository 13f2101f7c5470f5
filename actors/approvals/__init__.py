"""Tool calls that wait for a person's yes: which ones, who may answer, how an answer is read, what each side is
told (pure; the storage is storage/approvals.py, the design docs/approvals.md)."""
