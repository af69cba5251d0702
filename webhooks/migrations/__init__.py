"""The failure notifications app's database migrations."""
