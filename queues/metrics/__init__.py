"""The Prometheus exposition of taskhoster: figures computed at scrape time from the stores and
Task Logs (sources.py, figures.py), served at /metrics to a token or a staff session (views.py)."""
