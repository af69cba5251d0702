"""The queues app's management commands (in commands/)."""
