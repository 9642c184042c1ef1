"""The bundled example app and the `uwsgitune demo` command."""
