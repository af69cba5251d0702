"""A queue chooses its store: files (the default, as every queue was) or PostgreSQL."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0002_queue_attempt_budget_three"),
    ]

    operations = [
        migrations.AddField(
            model_name="queue",
            name="store",
            field=models.CharField(
                choices=[
                    ("files", "files: this machine's directories"),
                    ("postgres", "postgres: the PostgreSQL database (several web servers)"),
                ],
                default="files",
                help_text="Where the queue's tasks live. Files: one machine, fastest. PostgreSQL: several web servers share the queue. A change applies to new tasks and is refused while tasks are pending or processing; ended tasks stay in the old store until retention removes them.",
                max_length=8,
            ),
        ),
    ]
