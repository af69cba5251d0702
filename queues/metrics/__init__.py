"""The Prometheus exposition of taskhoster: figures computed at scrape time from the stores and
Task Logs (sources.py, figures.py), the server's own figures counted in process memory
(server.py, middleware.py, multiproc.py), served at /metrics to a token or a staff session
(views.py)."""
