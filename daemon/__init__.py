"""The daemon and the operator's side of it: the launcher (daemon life, signals, pid lock, loopback binding), the
admin client that attaches to a running gateway (status, tree, drain, fault), and every operator command run from a
shell (``sessions``, ``deliveries``, ``pair``, the terminal chat). Nothing here runs inside an actor.
"""
