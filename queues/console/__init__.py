"""The operators' console: pages, views, URLs, bulk actions, charts, insight, recent activity."""
