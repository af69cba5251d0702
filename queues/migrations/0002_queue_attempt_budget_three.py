"""New queues get an attempt budget of 3; the pause's help says what a claim answers.

Existing queues keep their budget: only the default changes.
"""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="queue",
            name="max_attempts",
            field=models.PositiveSmallIntegerField(
                default=3,
                help_text="How many times a task may run: a failure reported with retry (the Python worker loop reports a handler's exception so) or a lapsed lease runs it again after the backoff until this many attempts have run, then it fails with error 'attempts'. 1 to 8; 0: no budget (a lapsed lease re-queues until the queue timeout).",
                validators=[django.core.validators.MaxValueValidator(8)],
                verbose_name="attempt budget",
            ),
        ),
        migrations.AlterField(
            model_name="queue",
            name="paused",
            field=models.BooleanField(
                default=False,
                help_text="Claims get nothing while paused (a claim answers 204 with Queue-Paused: true); posting still works.",
            ),
        ),
    ]
