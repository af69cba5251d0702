"""The django-tasks backend's management commands (in commands/)."""
