"""Schedules: tasks posted to a queue on a cron expression."""
