"""The operator's console in the browser (docs/console.md): the actor (actor.py), its HTTP side (server.py), who may
read and act (access.py), what it reads and does (operations.py, views.py, memory.py), the last hour's counters the
metrics actor keeps for it (recent_minutes.py) and its page (static/)."""
