"""The Task Logs app's database migrations."""
