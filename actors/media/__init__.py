"""Attachments as data: what a file is (sniff), what it may be called (names), how large it may be (limits), and
what the model is shown of it (parts). Pure functions; the cache that holds the bytes is storage/media.py."""
