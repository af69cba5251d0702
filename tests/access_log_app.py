"""A WSGI app for tests/test_gunicorn_conf.py: answers every request with the status its
`status` query names (default 200), so gunicorn's access log can be read for each kind."""

from urllib.parse import parse_qs


def app(environ, start_response):
    status = parse_qs(environ.get("QUERY_STRING", "")).get("status", ["200"])[0]
    start_response(f"{status} Whatever", [("Content-Type", "text/plain")])
    return [b"ok"]
