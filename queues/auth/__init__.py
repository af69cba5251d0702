"""Who may do what: the roles on each queue, and the API's tokens."""
