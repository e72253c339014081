"""The operator's admin is titled Paperlane and lists django-rq's pages once."""

import pytest

pytestmark = pytest.mark.django_db


def test_the_admin_is_titled_paperlane_and_lists_the_queues_once(operator):
    index = operator.get("/admin/").content.decode()

    assert "<title>Operations | Paperlane</title>" in index
    assert '<div id="site-name"><a href="/admin/">Paperlane</a></div>' in index
    assert "Django administration" not in index
    assert index.count('href="/admin/django_rq/dashboard/"') == 1
    # Still there, where the one link leads.
    assert operator.get("/admin/django_rq/dashboard/").status_code == 200
