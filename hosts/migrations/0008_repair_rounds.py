from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("hosts", "0007_pool_targets"),
    ]

    operations = [
        migrations.AddField(
            model_name="host",
            name="repair_rounds",
            field=models.PositiveSmallIntegerField(db_default=0, default=0),
        ),
    ]
