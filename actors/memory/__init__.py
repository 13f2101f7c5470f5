"""What profiles remember: scopes, the memory section of a request, the remember / forget tools' binding."""
