"""`uwsgitune doctor`: is an instance ready to be tuned, and what to add where it is not.

The checks (`checks.py`: pure facts in, one `Check` per requirement out, and `gather`, which
reads them from the instance) and whether uWSGI's user can read the files it re-reads at a
reload (`access.py`).
"""

from uwsgitune.actuate.doctor.checks import Check, DoctorFacts, checks, gather

__all__ = ["Check", "DoctorFacts", "checks", "gather"]
