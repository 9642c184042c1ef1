"""Command line: argument parsing and wiring. No logic lives here."""
