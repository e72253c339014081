"""British English formats with seconds, used when FORMAT_MODULE_PATH names config.formats.

Operators compare admin times with logs and with each other, so minutes are not
enough. Anything not set here falls back to Django's own en_GB formats; times
are shown in the site's TIME_ZONE.
"""

DATETIME_FORMAT = "j M Y, H:i:s"  # '25 Oct 2006, 14:30:59'
SHORT_DATETIME_FORMAT = "d/m/Y H:i:s"  # '25/10/2006 14:30:59'
TIME_FORMAT = "H:i:s"  # '14:30:59'
