"""The admin's queue form pieces: seconds in words, a blankable schema, the sweep's preview."""
