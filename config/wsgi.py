import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from core.isolation import warm_up

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# What Django otherwise builds on a process's first request, built here, before the
# process takes one: the URLconf with the API and every view it imports, and the map
# `reverse()` reads (the upload's answer has its status URL). Left to the first
# requests, it made every web process's first uploads after a start 0.2 s slower on
# an idle machine and up to 1.3 s slower when a burst found it cold.
get_resolver().reverse_dict  # noqa: B018 - the property builds what it returns

# The fork server the upload inspection's child comes from (documents.reading), started
# here too: else the first upload of every web process would wait 1 to 2 s for it.
warm_up()
