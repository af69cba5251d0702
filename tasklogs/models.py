"""What the console keeps of the event log: every line it ever pulled, and where it stopped."""

from django.db import models

from .links import payload_url


class TaskEvent(models.Model):
    """One line of a day-file: every field of the event line (tasklogs.md), plus its origin.

    (file, offset, digest) is unique, so a line is stored once however many ingesters read it;
    the digest keeps a day-file rewritten with other content from colliding with the old lines.
    """

    t = models.BigIntegerField(help_text="Unix seconds (the day-file bucket).")
    at = models.DateTimeField()
    host = models.CharField(max_length=253)
    queue = models.CharField(max_length=64)
    task_id = models.CharField("task id", max_length=16)
    event = models.CharField(max_length=16)
    status = models.CharField(max_length=16)
    attempts = models.IntegerField()
    # The log's null (no worker held the task) is stored as "": the parser refuses an empty name.
    worker = models.CharField(max_length=255, blank=True)
    bytes_item = models.BigIntegerField("item bytes")
    bytes_progress = models.BigIntegerField("progress bytes")
    bytes_result = models.BigIntegerField("result bytes")
    bytes_error = models.BigIntegerField("error bytes")
    archived = models.CharField(
        max_length=40, blank=True, help_text="Payload kinds this event archived, comma-separated."
    )
    # The line's optional fields, absent from most lines: stored as "" and false, as a null
    # worker is (the parser refuses an empty name, so "" is never a real one).
    # The columns added after the first release also carry their defaults in the database
    # (db_default), so a row written without them (an ingester of the release before, a bulk
    # load in SQL) stores "" and false, not a refused NULL.
    by = models.CharField(max_length=150, blank=True, default="", db_default="",
                          help_text="The operator whose action it was.")  # fmt: skip
    origin = models.CharField(
        "re-posted from", max_length=16, blank=True, default="", db_default="",
        help_text="The task whose archived item this task was re-posted from.",
    )  # fmt: skip
    edited = models.BooleanField(default=False, db_default=False,
                                 help_text="The operator edited the item.")  # fmt: skip
    lapsed = models.BooleanField(default=False, db_default=False,
                                 help_text="The sweep found the lease lapsed.")  # fmt: skip
    reason = models.CharField(max_length=160, blank=True, default="", db_default="",
                              help_text="Why the attempt failed, in one line.")  # fmt: skip
    file = models.CharField("day-file", max_length=64)
    offset = models.BigIntegerField("byte offset")
    digest = models.BigIntegerField(help_text="64-bit hash of the raw line.")

    class Meta:
        # Every list is ordered by (at, id): the keyset. Each filter has an index that ends in
        # the keyset, so a page is an index range scan whatever the table size.
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["at", "id"], name="taskevent_at"),
            models.Index(fields=["host", "queue", "at", "id"], name="taskevent_queue_at"),
            models.Index(fields=["task_id", "at", "id"], name="taskevent_task_at"),
            models.Index(fields=["event", "at", "id"], name="taskevent_event_at"),
            models.Index(fields=["worker", "at", "id"], name="taskevent_worker_at"),
            # The console's counts and charts: one queue's events of some kinds over a time
            # range, read from the index alone (queues/console/activity.py and insight.py).
            models.Index(fields=["host", "queue", "event", "t"], name="taskevent_queue_event_t"),
            # A PostgreSQL queue's live event stream, whose events are rows of this table: its
            # rows past an id, and where a new subscriber starts (queues/store_pg/following.py).
            models.Index(fields=["host", "queue", "id"], name="taskevent_queue_id"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["file", "offset", "digest"], name="taskevent_line"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.host}/{self.queue}/{self.task_id} {self.event}"

    @property
    def archived_kinds(self) -> list[str]:
        return self.archived.split(",") if self.archived else []

    @property
    def payload_links(self) -> list[tuple[str, str]]:
        """(kind, address) of each payload this event archived: a result or an error is the
        one this event's attempt wrote, not a later attempt's."""
        return [
            (kind, payload_url(self.host, self.queue, self.task_id, kind,
                               attempts=self.attempts, event=self.event))
            for kind in self.archived_kinds
        ]  # fmt: skip


class IngestCursor(models.Model):
    """How far one day-file has been read: its name, the inode read, and the byte offset."""

    name = models.CharField(max_length=64, unique=True)
    inode = models.BigIntegerField()
    offset = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} @ {self.offset}"
