"""The dashboard and /metrics ask for `operations.view_pipeline`, not only for staff: the
Operators group has it, from its first migration on, and nobody else does."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from documents.services.organisations import OPERATORS_GROUP, member_add
from tests.support.pages import page_text

pytestmark = pytest.mark.django_db
DASHBOARD = "/admin/pipeline/"


@pytest.fixture
def staff(org) -> Client:
    """Staff, not in the Operators group."""
    sam = member_add(organisation=org, username="sam", password="staff-pass-1")
    sam.is_staff = True
    sam.save(update_fields=["is_staff"])
    client = Client()
    assert client.login(username="sam", password="staff-pass-1")
    return client


def test_staff_without_the_permission_are_refused_the_dashboard_and_metrics(staff):
    assert staff.get(DASHBOARD).status_code == 403
    assert staff.get("/metrics").status_code == 403
    index = staff.get("/admin/")
    assert index.status_code == 200 and "Pipeline dashboard" not in page_text(index)


def test_the_permission_alone_opens_both(staff):
    user = get_user_model().objects.get(username="sam")
    user.user_permissions.add(Permission.objects.get(codename="view_pipeline"))

    assert staff.get(DASHBOARD).status_code == 200
    assert staff.get("/metrics").status_code == 200


def test_operators_have_it(operator):
    assert operator.get(DASHBOARD).status_code == 200
    assert operator.get("/metrics").status_code == 200
    assert "Pipeline dashboard" in page_text(operator.get("/admin/"))


def test_the_migration_gives_it_to_an_operators_group_made_before_it(transactional_db):
    executor = MigrationExecutor(connection)
    executor.migrate([("operations", None)])
    assert not Permission.objects.filter(codename="view_pipeline").exists()
    group = Group.objects.create(name=OPERATORS_GROUP)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes("operations"))

    granted = {(p.content_type.app_label, p.codename) for p in group.permissions.all()}
    assert granted == {
        ("operations", "view_pipeline"),
        ("axes", "view_accessattempt"),
        ("axes", "delete_accessattempt"),
    }
