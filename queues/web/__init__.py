"""The web server's glue: response headers, lazy messages, the login lockout's answer."""
