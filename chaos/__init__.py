"""`make chaos`: a Jepsen-style run through the real HTTP API and gunicorn (quality.md, "chaos").

`python -m chaos.run` starts a server with temp dirs, producers, workers, a sweep loop and a
nemesis, then checks the producers' acks, the store and the event log. Nothing here imports
Django except through the subprocesses it starts, so the worker processes start quickly.
"""
