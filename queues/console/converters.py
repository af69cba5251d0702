"""The console's URL converter for a task id."""


class TaskIdConverter:
    """A task id in a URL: 16 lower-case hex characters, anything else is simply no match."""

    regex = "[0-9a-f]{16}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value
