"""Filters of the member pages: a run in a few words, and what may be done with it."""

from django import template

from web import runs

register = template.Library()

register.filter("summary", runs.run_summary)
register.filter("status_label", runs.status_label)
register.filter("active", runs.is_active)
register.filter("retry_offered", runs.retry_offered)
register.filter("file_fault", runs.file_fault)
register.filter("advice", runs.run_advice)
register.filter("timeline", runs.run_timeline)
