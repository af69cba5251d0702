"""createschedule: a task posted to a queue on a cron expression."""
