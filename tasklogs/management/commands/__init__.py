"""ingest_tasklogs: the event log's day-files into the console database."""
