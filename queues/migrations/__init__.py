"""The queues app's database migrations."""
