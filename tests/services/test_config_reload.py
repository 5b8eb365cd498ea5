"""Reading the configuration file again (``hoodied/config_reload.py``): only the tables and discovery roots
are taken, a change anywhere else is named as needing a restart, the same bytes change nothing, and a bad
file is refused with the old configuration kept."""

from __future__ import annotations

import os
from pathlib import Path

from hoodied.config import DaemonConfig
from hoodied.config_reload import ConfigFile, merge


def test_only_tables_and_roots_are_taken_and_other_changes_are_named(tmp_path: Path) -> None:
    old = DaemonConfig.parse("poll_interval: 30s\ntables: [/a]")
    new = DaemonConfig.parse("poll_interval: 10s\njobs: {takeover_grace: 5s}\ntables: [/a, /b]")
    result = merge(old, new)
    assert result.changed
    assert [t.path for t in result.config.tables] == ["/a", "/b"]
    assert result.config.poll_interval == 30.0  # bound at start-up
    assert result.config.jobs == old.jobs
    assert result.restart_needed == ("poll_interval", "poll_interval_max", "jobs")  # (the max follows)
    same = merge(old, DaemonConfig.parse("poll_interval: 30s\ntables: [/a]"))
    assert not same.changed
    assert same.restart_needed == ()


def test_the_file_is_read_again_when_asked_or_changed_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "hoodied.yaml"
    path.write_text("tables: [/a]\n")
    config = DaemonConfig.load(path)
    watched = ConfigFile(str(path))
    assert not watched.due()
    watched.request()
    assert watched.due()
    unchanged = watched.reload(config)
    assert not unchanged.changed
    assert unchanged.config is config
    assert not watched.due()

    path.write_text("tables: [/a, /b]\n")
    os.utime(path, ns=(1, 1))  # a rewrite within the clock's tick still changes the modification time
    assert watched.due()
    grown = watched.reload(config)
    assert grown.changed
    assert len(grown.config.tables) == 2

    path.write_text("tables: [/a, {path: /c, services: [compact]}]\n")
    os.utime(path, ns=(2, 2))
    refused = watched.reload(grown.config)
    assert refused.error is not None
    assert "compact" in refused.error
    assert refused.config is grown.config
    assert watched.error == refused.error
    path.unlink()
    watched.request()
    gone = watched.reload(grown.config)
    assert gone.error is not None
    assert "cannot read the configuration" in gone.error
    assert gone.config is grown.config
