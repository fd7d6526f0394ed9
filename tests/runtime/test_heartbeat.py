"""The launcher's watch of the ranks' heartbeat files: a rank silent for longer than the limit
is named with its last completed step; a rank not started or done (no file) is not watched."""

import os
import time

from hydraulis.runtime.heartbeat import NO_STEP, HeartbeatWatch, write_beat


def test_a_file_older_than_the_limit_names_its_rank_and_step(tmp_path):
    write_beat(tmp_path / "0", 3)
    write_beat(tmp_path / "1", 4)
    old = time.time() - 10
    os.utime(tmp_path / "0", (old, old))
    watch = HeartbeatWatch(tmp_path, 3, limit_s=5.0)
    silent = watch.silent()
    assert list(silent) == [0] and silent[0][1] == 3 and silent[0][0] >= 10
    assert watch.describe(silent).startswith("rank 0 stopped responding: no heartbeat in 1")
    assert watch.describe(silent).endswith("s (last completed step 3)")
    assert watch.last_step(1) == 4 and watch.last_step(2) == NO_STEP


def test_fresh_or_missing_files_are_not_silent(tmp_path):
    write_beat(tmp_path / "1", NO_STEP)
    assert HeartbeatWatch(tmp_path, 2, limit_s=5.0).silent() == {}
    assert HeartbeatWatch.describe({1: (6.0, NO_STEP)}) == "rank 1 stopped responding: no heartbeat in 6.0 s " \
                                                            "(no step completed)"
