"""WSGI entry point: gunicorn serves `taskhoster_site.wsgi:application`."""

import os

import django

from taskhoster_site.lanes import Lanes

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskhoster_site.settings")

django.setup(set_prefix=False)  # as django.core.wsgi.get_wsgi_application does
application = Lanes()
