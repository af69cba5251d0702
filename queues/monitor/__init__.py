"""The monitor: follow the event log's day-files and frame their lines as Server-Sent Events.

Plain Python (no Django) so the tail and the framing can be tested on a temporary directory:
`lines` reads a day-file's complete lines from a byte offset (the Task Logs ingester uses it
too), `tail` follows them across day-files from a position, `stream` turns the tail and the
store's watcher into the SSE byte stream the API view returns.
"""
