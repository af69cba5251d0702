"""WSGI entry point: gunicorn serves `taskhoster_site.wsgi:application`."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskhoster_site.settings")

application = get_wsgi_application()
