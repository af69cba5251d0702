"""One bound for a queue's integer settings on every database: maxProcessing and maxPerKey at
most 1,000,000, the seconds and maxPending at most 2,147,483,647 (Django's own bound was the
column's: 2^63-1 on SQLite, 2^31-1 on PostgreSQL). Validators only: no column changes."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('queues', '0005_api_token_name_rule'),
    ]

    operations = [
        migrations.AlterField(
            model_name='queue',
            name='backoff_cap_seconds',
            field=models.PositiveIntegerField(default=300, validators=[django.core.validators.MaxValueValidator(2147483647)], verbose_name='longest retry delay (s)'),
        ),
        migrations.AlterField(
            model_name='queue',
            name='backoff_seconds',
            field=models.PositiveIntegerField(default=5, help_text='Delay before a retried attempt; multiplied by the factor on each attempt.', validators=[django.core.validators.MaxValueValidator(2147483647)], verbose_name='first retry delay (s)'),
        ),
        migrations.AlterField(
            model_name='queue',
            name='lease_seconds',
            field=models.PositiveIntegerField(default=60, help_text='How long a claim holds a task before the sweep hands it to another worker. Workers extend it by reporting progress. At most the queue timeout.', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(2147483647)], verbose_name='lease (s)'),
        ),
        migrations.AlterField(
            model_name='queue',
            name='max_pending',
            field=models.PositiveIntegerField(default=0, help_text='0: unbounded. Posting beyond it answers 429 queue_full.', validators=[django.core.validators.MaxValueValidator(2147483647)], verbose_name='most pending tasks'),
        ),
        migrations.AlterField(
            model_name='queue',
            name='max_per_key',
            field=models.PositiveIntegerField(default=0, help_text="0: unbounded. Tasks posted with one concurrencyKey in processing at once; claims take the queue's other tasks past the held ones.", validators=[django.core.validators.MaxValueValidator(1000000)], verbose_name='most processing per key'),
        ),
        migrations.AlterField(
            model_name='queue',
            name='max_processing',
            field=models.PositiveIntegerField(default=0, help_text='0: unbounded. Tasks in processing at once, across every worker.', validators=[django.core.validators.MaxValueValidator(1000000)], verbose_name='most tasks processing'),
        ),
        migrations.AlterField(
            model_name='queue',
            name='max_retain_seconds',
            field=models.PositiveIntegerField(default=604800, help_text="Under 'fetched', a result nobody reads is still deleted after this long.", validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(2147483647)], verbose_name='longest retention (s)'),
        ),
        migrations.AlterField(
            model_name='queue',
            name='queue_seconds',
            field=models.PositiveIntegerField(default=86400, help_text="A task older than this fails with error 'timeout', waiting or running.", validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(2147483647)], verbose_name='queue timeout (s)'),
        ),
        migrations.AlterField(
            model_name='queue',
            name='retain_seconds',
            field=models.PositiveIntegerField(default=3600, help_text='How long a finished, failed or cancelled task stays readable.', validators=[django.core.validators.MaxValueValidator(2147483647)], verbose_name='retention (s)'),
        ),
    ]
