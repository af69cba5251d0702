"""An API token's name follows the one rule for names (queues/store/names.py): no control,
format or separator characters. A validator only: the column does not change."""

import queues.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('queues', '0004_queue_flow_control'),
    ]

    operations = [
        migrations.AlterField(
            model_name='apitoken',
            name='name',
            field=models.CharField(help_text="What the token is for, e.g. 'box-1'.", max_length=100, validators=[queues.validators.validate_name]),
        ),
    ]
