"""The shapes of api.md's bodies, for the OpenAPI schema. They validate and save nothing:
the views read bodies with queues.api.inputs and the store decides everything else."""

from rest_framework import serializers

from queues.store import STATUSES


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="api.md's error code, e.g. not_found or lease_lost.")
    detail = serializers.CharField(help_text="One human sentence.")
    index = serializers.IntegerField(
        required=False,
        help_text="A batch's refusal: the entry it is about (0-based). Nothing was written.",
    )


class LeaseSerializer(serializers.Serializer):
    worker = serializers.CharField()
    until = serializers.IntegerField(help_text="When the lease lapses, ms since the epoch.")


class _ExtensionFields(serializers.Serializer):
    """taskhoster's extension fields: present only when set."""

    rev = serializers.IntegerField(required=False)
    priority = serializers.IntegerField(required=False, min_value=-100, max_value=100)
    availableAt = serializers.IntegerField(required=False)
    maxAttempts = serializers.IntegerField(required=False)
    idempotencyKey = serializers.CharField(required=False)
    cancelRequested = serializers.BooleanField(required=False)
    lastError = serializers.JSONField(required=False, allow_null=True)
    leaseSeconds = serializers.IntegerField(
        required=False, help_text="The claim's lease length; progress extends the lease by it."
    )
    worker = serializers.CharField(
        required=False,
        help_text="For an operator only (read, list, cancel, retry): the worker holding the "
        "lease, or the one whose own report ended the task.",
    )
    traceparent = serializers.CharField(
        required=False,
        help_text="The W3C trace context of the post that made the task (with OpenTelemetry on "
        "the server): a worker links its span for running the task to it.",
    )
    concurrencyKey = serializers.CharField(
        required=False,
        help_text="The post's concurrency key: at most the queue's maxPerKey tasks with one key "
        "are in processing at once.",
    )
    heldBy = serializers.ChoiceField(
        choices=["rate", "maxProcessing", "key"],
        required=False,
        help_text="A read of a pending, claimable task only: what holds it back now (the "
        "queue's rate limit, its maxProcessing, or its concurrencyKey's maxPerKey).",
    )
    why = serializers.CharField(
        required=False,
        help_text="A read of a pending task only: why it is not running, in one line (the "
        "queue paused, the dependency it waits for, its backoff or delay and until when, the "
        "flow limit holding it, how many claimable tasks are ahead of it, or that no worker "
        "has claimed from the queue for some minutes).",
    )
    requeuedAt = serializers.IntegerField(
        required=False,
        help_text="When a retry (an operator's, or a failure's backoff within the attempt "
        "budget) put the task back; the queue timeout counts from the later of postedAt and "
        "this.",
    )
    after = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="The tasks this one was posted to run after, as queue/id of its host.",
    )
    waitingFor = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="Those of `after` not finished yet: no claim takes the task while any is left.",
    )
    onDependencyFailure = serializers.ChoiceField(
        choices=["cancel"],
        required=False,
        help_text="cancel: a failed dependency cancels this task (without it, fails it).",
    )
    releasedAt = serializers.IntegerField(
        required=False,
        help_text="When the last of `after` finished; the queue timeout counts from here.",
    )
    failedDependency = serializers.CharField(
        required=False,
        help_text="The dependency (queue/id) whose failure, timeout or cancel ended this task.",
    )


class TaskStatusSerializer(_ExtensionFields):
    """The producer's status view of a task."""

    id = serializers.RegexField(r"^[0-9a-f]{16}$")
    host = serializers.CharField()
    queue = serializers.CharField()
    status = serializers.ChoiceField(choices=STATUSES)
    attempts = serializers.IntegerField()
    progress = serializers.JSONField(allow_null=True)
    result = serializers.JSONField(allow_null=True)
    error = serializers.CharField(
        allow_null=True, help_text="'timeout', 'attempts' or 'dependency_failed'."
    )
    postedAt = serializers.IntegerField()
    updatedAt = serializers.IntegerField()
    finishedAt = serializers.IntegerField(allow_null=True)


class TaskRecordSerializer(TaskStatusSerializer):
    """The full record: what a worker's claim answers."""

    item = serializers.DictField(child=serializers.JSONField())
    postedBy = serializers.CharField(allow_null=True)
    lease = LeaseSerializer(allow_null=True)
    fetchedAt = serializers.IntegerField(allow_null=True)


class TaskPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = TaskStatusSerializer(many=True)


class PostEntrySerializer(serializers.Serializer):
    item = serializers.DictField(child=serializers.JSONField(), help_text="The task's item.")
    delay = serializers.IntegerField(required=False, min_value=0, help_text="0..queueSeconds.")
    priority = serializers.IntegerField(required=False, min_value=-100, max_value=100)
    idempotencyKey = serializers.CharField(
        required=False,
        max_length=255,
        help_text="As the Idempotency-Key header of a single post; each key once per batch.",
    )
    after = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        max_length=100,
        help_text="Task ids (id, or queue/id of another queue of the host) that must finish "
        "before this task may be claimed.",
    )
    onDependencyFailure = serializers.ChoiceField(
        choices=["fail", "cancel"],
        required=False,
        help_text="What a failed dependency does to this task (default fail).",
    )


class OnCompleteSerializer(serializers.Serializer):
    queue = serializers.CharField(help_text="A queue of the host, on the same store.")
    item = serializers.JSONField(
        required=False, help_text="The callback's item (default {}); `group` is set to the outcome."
    )


class PostManyRequestSerializer(serializers.Serializer):
    tasks = PostEntrySerializer(many=True, help_text="1..100 entries.")
    group = serializers.CharField(
        required=False, help_text="The group every entry joins (see the single post's group)."
    )
    onComplete = OnCompleteSerializer(
        required=False, help_text="Closes the group: its callback, once every task has ended."
    )


class PostManySerializer(serializers.Serializer):
    tasks = TaskStatusSerializer(many=True, help_text="Each entry's task, in order.")
    replayed = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Indexes of the entries whose Idempotency-Key answered an earlier task.",
    )


class OutcomeSerializer(serializers.Serializer):
    id = serializers.RegexField(r"^[0-9a-f]{16}$")
    attempt = serializers.IntegerField(help_text="The task's attempts as the claim answered.")
    outcome = serializers.ChoiceField(
        choices=["result", "fail", "retry"],
        help_text="result: finished; fail: failed; retry: failed, back to pending after the "
        "backoff while the attempt budget lasts.",
    )
    result = serializers.JSONField(
        required=False, allow_null=True, help_text="Required with outcome result."
    )


class NextClaimSerializer(serializers.Serializer):
    max = serializers.IntegerField(required=False, min_value=1, max_value=100, default=1)
    wait = serializers.FloatField(required=False, min_value=0, max_value=60, default=0)
    lease = serializers.IntegerField(
        required=False, min_value=1, help_text="Seconds; default the queue's leaseSeconds."
    )


NEXT_HELP = (
    "Claim up to max tasks for this worker once the report is made, as a claim would: the "
    'answer then holds them in "next" (empty when none came within wait).'
)
NEXT_ANSWER_HELP = 'With "next" in the request: the tasks it claimed, full records.'


class FinishManyRequestSerializer(serializers.Serializer):
    worker = serializers.CharField(min_length=1, max_length=200)
    outcomes = OutcomeSerializer(many=True, help_text="1..100 entries, each task once.")
    next = NextClaimSerializer(required=False, help_text=NEXT_HELP)


class EntryAnswerSerializer(serializers.Serializer):
    status = serializers.IntegerField(help_text="The status a single report would answer.")
    task = TaskStatusSerializer(required=False, help_text="200: the task as it now stands.")
    replayed = serializers.BooleanField(
        required=False, help_text="200: this report repeated the one that ended the attempt."
    )
    code = serializers.CharField(required=False, help_text="A refusal of this entry alone.")
    detail = serializers.CharField(required=False)


class FinishManySerializer(serializers.Serializer):
    outcomes = EntryAnswerSerializer(many=True, help_text="One answer per entry, in order.")
    next = TaskRecordSerializer(many=True, required=False, help_text=NEXT_ANSWER_HELP)


class ReportAnswerSerializer(TaskStatusSerializer):
    next = TaskRecordSerializer(many=True, required=False, help_text=NEXT_ANSWER_HELP)


class ItemSerializer(serializers.Serializer):
    """Any JSON object; the queue's itemSchema, if it has one, decides more."""


class ClaimRequestSerializer(serializers.Serializer):
    worker = serializers.CharField(min_length=1, max_length=200)
    wait = serializers.FloatField(required=False, min_value=0, max_value=60, default=0)
    lease = serializers.IntegerField(
        required=False, min_value=1, help_text="Seconds; default the queue's leaseSeconds."
    )
    max = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=100,
        help_text='Claim up to this many; the answer is then {"tasks": [...]}.',
    )


class ClaimManySerializer(serializers.Serializer):
    tasks = TaskRecordSerializer(many=True)


class _Fenced(serializers.Serializer):
    worker = serializers.CharField(min_length=1, max_length=200)
    attempt = serializers.IntegerField(help_text="The task's attempts as the claim answered.")


class ProgressRequestSerializer(_Fenced):
    progress = serializers.JSONField(
        required=False,
        help_text="Omit for a heartbeat: it extends the lease only, and writes no event.",
    )


class ProgressResponseSerializer(serializers.Serializer):
    lease = LeaseSerializer()
    cancelRequested = serializers.BooleanField()


class ResultRequestSerializer(_Fenced):
    result = serializers.JSONField()
    next = NextClaimSerializer(required=False, help_text=NEXT_HELP)


class FailRequestSerializer(_Fenced):
    result = serializers.JSONField(required=False, allow_null=True)
    retry = serializers.BooleanField(required=False, default=False)
    cancelled = serializers.BooleanField(required=False, default=False)
    next = NextClaimSerializer(required=False, help_text=NEXT_HELP)


class QueueStatsSerializer(serializers.Serializer):
    host = serializers.CharField()
    queue = serializers.CharField()
    paused = serializers.BooleanField(help_text="Claims get nothing (204) while it is paused.")
    pending = serializers.IntegerField(help_text="Waiting to be claimed, delayed ones included.")
    processing = serializers.IntegerField()
    done = serializers.IntegerField(help_text="Finished, failed or cancelled, not yet cleaned.")
    delayed = serializers.IntegerField(help_text="Pending, not claimable before availableAt.")
    retrying = serializers.IntegerField(help_text="Pending after a failure, in its backoff.")
    oldestPendingAgeMs = serializers.IntegerField(
        help_text="How long the oldest pending task has waited, in ms; 0 when none."
    )


class GroupCountsSerializer(serializers.Serializer):
    finished = serializers.IntegerField()
    failed = serializers.IntegerField()
    cancelled = serializers.IntegerField()
    gone = serializers.IntegerField(help_text="Posts that registered a task and never wrote it.")


class TaskLinkSerializer(serializers.Serializer):
    queue = serializers.CharField()
    id = serializers.CharField()


class GroupSerializer(serializers.Serializer):
    id = serializers.CharField()
    host = serializers.CharField()
    queue = serializers.CharField()
    state = serializers.ChoiceField(
        choices=["open", "closed", "complete", "called_back"],
        help_text="open: takes more tasks; closed: a post gave onComplete; complete: every task "
        "ended, the callback is due; called_back: the callback was posted.",
    )
    postedBy = serializers.CharField(allow_null=True)
    posted = serializers.IntegerField(help_text="Tasks posted in the group.")
    ended = serializers.IntegerField(help_text="Tasks that ended (each counted once).")
    running = serializers.IntegerField(help_text="posted - ended.")
    counts = GroupCountsSerializer()
    onCompleteQueue = serializers.CharField(allow_null=True)
    callback = TaskLinkSerializer(allow_null=True)


class QueueLinkSerializer(serializers.Serializer):
    host = serializers.CharField()
    queue = serializers.CharField()
    roles = serializers.ListField(child=serializers.ChoiceField(["operator", "producer", "worker"]))
    paused = serializers.BooleanField()
    tasks = serializers.URLField(help_text="Post (producer) or list tasks.")
    stats = serializers.URLField()
    claim = serializers.URLField(required=False, help_text="Present for a worker.")
    events = serializers.URLField(required=False, help_text="Present for an operator.")


class ApiRootSerializer(serializers.Serializer):
    docs = serializers.URLField(help_text="The interactive API reference.")
    schema = serializers.URLField(help_text="The OpenAPI 3 schema.")
    user = serializers.CharField(allow_null=True, help_text="Whom the token belongs to.")
    queues = QueueLinkSerializer(
        many=True, help_text="The queues the caller holds a role on; none without a token."
    )
    detail = serializers.CharField(required=False, help_text="Without a token: how to send one.")
