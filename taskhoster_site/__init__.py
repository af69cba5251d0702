"""The Django project: settings, URLs, WSGI."""
