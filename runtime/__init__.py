"""The runtime seam: everything of the gateway that touches CPython's or Thespian's private internals, and nothing
else.

Each module is one concept, says in its docstring which internals it relies on, and has a ``missing()`` that checks
them; ``versions.py`` is the one table of the Python and Thespian releases they were checked against, and
``selftest.py`` runs every ``missing()`` at start (a runtime that lacks one is refused, exit 69) and in ``doctor``.

* loop_stepping      one asyncio loop pass at a time on the actor's thread (the stepped bridge)
* loopback           every actor socket bound to the configured interface
* peer_check         every accepted connection checked (common/peer_credentials.py) before it is read
* frame_mac          every frame signed and checked before it is unpickled
* held_port          the admin port held from its check until the admin listens
* ack_wait           a transmit waiting for its ACK is left to its socket
* poll_selector      Thespian's select loop on poll(2)
* lazy_identify      Thespian's debug descriptions made only when written
* child_addresses    the address of a child that is gone forgotten
* convention_timing  a convention's failure-detection periods
* thespian_log       a rate-limited warning in Thespian's own log
* shapes             how a module says what it expects of an internal

Code elsewhere reaches Thespian only through its public API (``thespian.actors``) and asyncio only through its
public one. Ranked below supervision/ in the folder import order (tests/project/test_layering.py): daemon/,
actors/ and supervision/ import it; it imports nothing of theirs.
"""
