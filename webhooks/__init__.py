"""Failure notifications: webhooks, the notifications made from the event log, their deliveries."""
