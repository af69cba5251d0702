"""A queue may limit its claims: a rate (claims per seconds), how many run at once, and how
many of one concurrency key run at once (0: no limit, as every queue was)."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('queues', '0003_queue_store'),
    ]

    operations = [
        migrations.AddField(
            model_name='queue',
            name='max_per_key',
            field=models.PositiveIntegerField(default=0, help_text="0: unbounded. Tasks posted with one concurrencyKey in processing at once; claims take the queue's other tasks past the held ones.", verbose_name='most processing per key'),
        ),
        migrations.AddField(
            model_name='queue',
            name='max_processing',
            field=models.PositiveIntegerField(default=0, help_text='0: unbounded. Tasks in processing at once, across every worker.', verbose_name='most tasks processing'),
        ),
        migrations.AddField(
            model_name='queue',
            name='rate_count',
            field=models.PositiveIntegerField(default=0, help_text='At most this many claims per the seconds below, across every worker and server process (0: no rate limit). A claim over it waits for a token within its wait, or answers 204 with Retry-After and Queue-Limited: rate.', validators=[django.core.validators.MaxValueValidator(1000000)], verbose_name='rate limit: claims'),
        ),
        migrations.AddField(
            model_name='queue',
            name='rate_seconds',
            field=models.PositiveIntegerField(default=1, validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(86400)], verbose_name='rate limit: per seconds'),
        ),
    ]
