"""The bench's Django project: Django's own admin and a generic ListView over PostgreSQL."""
