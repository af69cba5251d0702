"""The console's template tags and filters: readable JSON, moments and durations."""
