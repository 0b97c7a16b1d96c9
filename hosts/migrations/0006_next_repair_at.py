from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("hosts", "0005_worker_capacity"),
    ]

    operations = [
        migrations.AddField(
            model_name="host",
            name="next_repair_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
