"""Text shown to people: durations in words, a failure's line, readable JSON, control characters."""
