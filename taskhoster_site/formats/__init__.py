"""Date formats of the site's locales (FORMAT_MODULE_PATH)."""
