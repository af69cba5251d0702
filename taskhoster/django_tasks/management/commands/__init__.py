"""taskhoster_worker: run a project's tasks from a taskhoster queue."""
