"""The monitor: follow the event log's day-files and frame their lines as Server-Sent Events.

Plain Python (no Django) so the tail and the framing can be tested on a temporary directory:
`tail` reads complete lines from a position, `watch` wakes readers when a day-file grows,
`stream` turns both into the SSE byte stream the API view returns.
"""
