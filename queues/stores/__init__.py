"""Which store a queue uses and how the Django side opens them."""
