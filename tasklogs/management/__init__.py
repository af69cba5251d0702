"""The Task Logs app's management commands (in commands/)."""
