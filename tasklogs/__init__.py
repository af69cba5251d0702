"""Task Logs: the event log ingested into the console database, its views and admin."""
