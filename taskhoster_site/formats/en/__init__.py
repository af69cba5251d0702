"""English date formats: the console's way of writing a time."""
