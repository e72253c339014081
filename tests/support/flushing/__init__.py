"""A test-only app whose `flush` command replaces Django's in the test process (it comes
first in tests/settings.py's INSTALLED_APPS, and the first app to define a command wins).

Every transactional test ends in a flush. Django's truncates every table, then its
post_migrate handlers write the content types and permissions back: 120 ms a test on
PostgreSQL, 50 s of the fast suite. This one deletes the rows of the tables that hold any,
about 10 ms, and keeps the content types and permissions that migrate wrote once.
"""
