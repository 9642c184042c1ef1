"""uwsgitune: monitor, explain and autotune a live uWSGI."""

__version__ = "0.1.0"
