"""The actor kit: the behaviour every actor and cell shares (``behaviour``), the process actor (``actor``) and the
cell (``cell``, ``cell_host``), OTP-style child specs and the supervisor (``spec``, ``supervisor``), the supervision
protocol (``messages``), tree descriptions (``describing``, ``tree``), and what actors use to reach the outside: the
async bridge, storage access and HTTP serving. It knows nothing of chats, platforms or agents.
"""
