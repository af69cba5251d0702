"""createqueue, grant, createtoken, sweep, serve, bootstrap and the other commands."""
