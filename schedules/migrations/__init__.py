"""The schedules app's database migrations."""
