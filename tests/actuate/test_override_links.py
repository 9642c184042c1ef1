"""Root rewrites the override in a directory uWSGI's user can write (issue 36, 1): a link
or a second name planted there never makes root copy a file it points at. Real files, real
links; the app's user is 65534 (nobody), its directory is nobody's 0755, "shadow" is a
root-owned 0600 file standing in for /etc/shadow."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from uwsgitune.actuate.override import Override, SetupError, check_override, restore, write_atomic

NOBODY = 65534
SECRET = b"root:$6$SECRETSECRET:19000:0:99999:7:::\n"
OLD = Override(4, 1, 2).render()
NEW = Override(6, 1, 3).render()
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the attack is on root")


@dataclass
class Site:
    app: Path  # nobody's directory, where the override lives (the unit's StateDirectory)
    shadow: Path  # root's secret, outside it
    theirs: Path  # a file the app's user owns and reads

    @property
    def override(self) -> Path:
        return self.app / "app.ini"

    @property
    def prev(self) -> Path:
        return self.app / "app.ini.prev"

    def names(self) -> list[str]:
        return sorted(os.listdir(self.app))


@pytest.fixture
def site() -> Iterator[Site]:
    top = Path(tempfile.mkdtemp(prefix="uwt-links-", dir="/tmp"))
    top.chmod(0o755)
    app, shadow = top / "state", top / "shadow"
    app.mkdir(mode=0o755)
    os.chown(app, NOBODY, NOBODY)
    shadow.write_bytes(SECRET)
    shadow.chmod(0o600)
    theirs = app / "loot"
    theirs.write_bytes(b"")
    os.chown(theirs, NOBODY, NOBODY)
    try:
        yield Site(app, shadow, theirs)
    finally:
        shutil.rmtree(top)


def _link_line(link: Path, target: Path) -> str:
    return (
        f"{link} is a symlink (to {target}): refused; the override must be a regular file with "
        "one name (a link could point root at any file): install it as one, or give the "
        "link's target as the override"
    )


def test_an_override_linked_to_shadow_with_prev_linked_to_their_file_is_refused(
    site: Site,
) -> None:
    site.override.symlink_to(site.shadow)
    site.prev.symlink_to(site.theirs)
    with pytest.raises(SetupError) as err:
        write_atomic(site.override, NEW)
    assert str(err.value) == _link_line(site.override, site.shadow)
    assert site.theirs.read_bytes() == b"" and site.shadow.read_bytes() == SECRET
    assert site.override.is_symlink() and site.prev.is_symlink()
    assert site.names() == ["app.ini", "app.ini.prev", "loot"]  # no temporary left
    with pytest.raises(SetupError) as err:
        restore(site.override)  # .prev is a link to their file: never read through
    assert str(err.value).startswith(f"{site.prev} is a symlink (to {site.theirs}): refused; ")
    with pytest.raises(SetupError):
        check_override(site.override)  # what plan() and doctor ask before anything
    assert site.theirs.read_bytes() == b"" and site.shadow.read_bytes() == SECRET


def test_prev_linked_to_their_file_is_replaced_never_written_through(site: Site) -> None:
    """.prev keeps the old override's owner and mode (the file whose bytes it holds), not
    those of whatever sat at .prev: their file is untouched, and they get no copy."""
    site.override.write_text(OLD)
    site.override.chmod(0o600)
    site.prev.symlink_to(site.theirs)
    write_atomic(site.override, NEW)
    assert site.theirs.read_bytes() == b""
    st = os.lstat(site.prev)
    assert stat.S_ISREG(st.st_mode) and (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600)
    assert site.prev.read_text() == OLD and site.override.read_text() == NEW


def test_a_hard_linked_override_is_refused(site: Site) -> None:
    os.link(site.shadow, site.override)  # a second name of root's file, in their directory
    site.prev.write_bytes(b"")
    os.chown(site.prev, NOBODY, NOBODY)
    with pytest.raises(SetupError) as err:
        write_atomic(site.override, NEW)
    assert str(err.value).startswith(
        f"{site.override} has 2 hard links (another name of the same file could be anyone's): "
        "refused; the override must be a regular file with one name"
    )
    assert site.prev.read_bytes() == b"" and os.stat(site.prev).st_uid == NOBODY
    assert site.shadow.read_bytes() == SECRET and os.stat(site.shadow).st_nlink == 2


def test_restore_never_copies_a_linked_prev_into_their_override(site: Site) -> None:
    """The override is theirs (a regular file of nobody's); `.prev` links to shadow: the
    restore refuses, and their override never receives shadow's bytes."""
    site.override.write_text(OLD)
    os.chown(site.override, NOBODY, NOBODY)
    site.prev.symlink_to(site.shadow)
    with pytest.raises(SetupError, match=r"app\.ini\.prev is a symlink \(to "):
        restore(site.override)
    assert site.override.read_text() == OLD and SECRET not in site.override.read_bytes()


@pytest.mark.parametrize("what", ["fifo", "dangling"])
def test_a_fifo_or_a_dangling_link_is_refused_without_hanging(site: Site, what: str) -> None:
    if what == "fifo":
        os.mkfifo(site.override)  # a plain open for reading would wait for a writer
    else:
        site.override.symlink_to(site.app / "missing")
    with pytest.raises(SetupError) as err:
        write_atomic(site.override, NEW)
    why = "is not a regular file (a FIFO)" if what == "fifo" else "is a symlink (to "
    assert str(err.value).startswith(f"{site.override} {why}"), err.value
    assert not (site.app / "missing").exists() and site.names() == ["app.ini", "loot"]
