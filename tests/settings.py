"""The site's settings for the test run: production's defaults, spoken over plain HTTP.

The suite's clients (the test client, the live server, the browser) talk HTTP, so the HTTPS
redirect and secure cookies that production turns on by default are off here; test_settings.py
checks them on the real settings module in fresh processes.
"""

import os

os.environ.setdefault("TASKHOSTER_HTTPS", "0")

from taskhoster_site.settings import *  # noqa: F403

# The tests' users are made and logged in by the dozen, each password hashed with production's
# PBKDF2 (about 0.4 CPU s a hash here); what they test is who may do what, not the hash's
# strength, so they use Django's fastest hasher. Production's list is left as Django ships it.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
