"""A schedule's name follows the one rule for names (queues/store/names.py): no control,
format or separator characters. A validator only: the column does not change."""

import queues.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('schedules', '0001_initial'),
    ]

    operations = [
        migrations.AlterField(
            model_name='schedule',
            name='name',
            field=models.CharField(help_text="Unique within the queue, e.g. 'nightly'.", max_length=100, validators=[queues.validators.validate_name]),
        ),
    ]
