"""The schedules app's management commands (in commands/)."""
