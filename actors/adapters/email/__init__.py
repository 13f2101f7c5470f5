"""Email: one mailbox, IMAP in, SMTP out (README.md beside this file)."""
