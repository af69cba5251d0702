"""The HTTP API of api.md: DRF views, inputs, errors, authentication and URLs."""
