"""Settings of the bench's Django site. The database is the bench's throw-away cluster,
named by the environment (bench/thirdparty/__init__.py sets it for uWSGI and the setup)."""

from __future__ import annotations

import os

# A bench site on loopback, never deployed: a fixed key keeps the setup's session valid in
# every uWSGI worker.
SECRET_KEY = "uwsgitune-bench-thirdparty-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
ROOT_URLCONF = "tpsite.urls"
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "tpsite.shop",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("UWT_PGDATABASE", "shop"),
        "USER": "postgres",
        "HOST": os.environ.get("UWT_PGHOST", ""),  # a dir: the unix socket's
        "PORT": os.environ.get("UWT_PGPORT", "5432"),
        # persistent connections, one per worker, as a tuned deployment has
        "CONN_MAX_AGE": 600,
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "/static/"
LOGGING_CONFIG = None  # nothing logged: the requests carry a session cookie
