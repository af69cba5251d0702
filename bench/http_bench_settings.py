"""The site's settings plus one trivial DRF endpoint (the benchmark's ceiling), bench only."""

from taskhoster_site.settings import *  # noqa: F403

ROOT_URLCONF = "http_bench_urls"
