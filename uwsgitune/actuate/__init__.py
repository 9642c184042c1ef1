"""The tuner's I/O shell: the tuner service (`service.py`) and what it acts through.

- `fifo.py`: guarded writes to the master FIFO (the FIFO route: `+`, `-`);
- `reload.py`: the reload route (validate, write, pause first, `r`, verify or roll back),
  the stop asked of an apply in flight (`Halt`), the deadline from uWSGI's mercy;
- `restart.py`: the restart route for `listen`, and running the restart command;
- `override.py`: the ini files: the user's (and where /proc says it is), the override
  uwsgitune owns, what uWSGI would refuse, the options a master was given besides;
- `lock.py`: the apply lock (its directory, its file, a reload's marks);
- `audit.py`: the audit log; `peer.py`: whose stats these are;
- `leftpaused.py`: a pool a killed reload left paused, resumed by whoever acts next;
- `doctor/`: is an instance ready to be tuned.
"""
