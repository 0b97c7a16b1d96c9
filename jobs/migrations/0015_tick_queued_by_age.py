"""The dashboard's oldest waits read the queued jobs by age from an index of their own."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0014_provisioning")]

    operations = [
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("status", "queued")),
                fields=["created_at", "id"],
                name="job_queued_by_age",
            ),
        ),
    ]
