"""Project wiring: settings, URLs, the one NinjaAPI, WSGI. The top layer: it may import
every app, and no app imports it."""
