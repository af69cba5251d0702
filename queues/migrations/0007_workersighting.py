"""A worker's last claim on a queue, for the workers page (queues/api/sightings.py)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0006_queue_integer_bounds"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkerSighting",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("host", models.CharField(max_length=253)),
                ("queue", models.CharField(max_length=64)),
                ("worker", models.CharField(max_length=255)),
                ("seen_at", models.DateTimeField()),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("host", "queue", "worker"), name="one_sighting_a_worker"
                    )
                ],
            },
        ),
    ]
