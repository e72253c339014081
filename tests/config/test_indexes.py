"""No index of ours is paid for twice: an index whose columns begin another index's
serves nothing that one does not, and every insert of its table pays for it."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

APPS = ("documents_", "jobs_")

# Plain (non-unique, whole-table, column) indexes that begin another plain-column index
# of their table with the same operator classes (a `_like` index serves LIKE and is kept).
REDUNDANT = """
SELECT a.indexrelid::regclass::text, b.indexrelid::regclass::text
FROM pg_index a
JOIN pg_index b ON b.indrelid = a.indrelid AND b.indexrelid <> a.indexrelid
WHERE NOT a.indisunique
  AND a.indpred IS NULL AND b.indpred IS NULL
  AND a.indexprs IS NULL AND b.indexprs IS NULL
  AND (b.indkey::text || ' ') LIKE (a.indkey::text || ' %%')
  AND (b.indclass::text || ' ') LIKE (a.indclass::text || ' %%')
  AND a.indrelid::regclass::text LIKE ANY (%s)
"""


def test_no_index_is_served_by_another_already():
    with connection.cursor() as cursor:
        cursor.execute(REDUNDANT, [[f"{prefix}%" for prefix in APPS]])
        redundant = sorted(cursor.fetchall())

    assert redundant == []
