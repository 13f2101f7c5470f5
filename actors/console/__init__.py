"""The operator's console in the browser (docs/console.md): the actor (actor.py), its HTTP side (server.py), who may
read and act (access.py), what it reads and does (operations.py, views.py) and its page (static/)."""
