"""Operations keeps no records of its own: one permission-only model carries what the
operator's pages ask for beyond being staff."""

from django.db import models

# What the dashboard and /metrics ask of a staff member.
VIEW_PIPELINE = "operations.view_pipeline"


class PipelineAccess(models.Model):
    """No table. `operations.view_pipeline` lets a staff member read the pipeline dashboard
    (`/admin/pipeline/`) and `/metrics`; the Operators group has it."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [("view_pipeline", "Can view the pipeline dashboard and metrics")]

    def __str__(self) -> str:
        return "pipeline access"
