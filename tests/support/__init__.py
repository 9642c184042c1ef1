"""Helpers the tests of several packages share: synthetic stats documents and instances fed
through the real Tracker (`instances.py`), synthetic frames for the rules and the tuner
(`frames.py`), and the real-uWSGI tuner service (`tuned.py`)."""
