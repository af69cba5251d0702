"""The queues app: hosts, queues, access and tokens, the two stores, the console and the API."""
