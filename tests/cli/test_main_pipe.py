"""`pulsar-lens ... | head`: a reader that goes away ends the command quietly."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

F_SETPIPE_SZ = 1031  # Linux: the pipe's capacity, so a small output already fills it


def test_a_closed_pipe_ends_the_command_without_a_traceback() -> None:
    read, write = os.pipe()
    fcntl.fcntl(write, F_SETPIPE_SZ, 4096)
    argv = [sys.executable, "-m", "pulsar_lens.cli.main", "tables"]  # ~15 kB of text
    with subprocess.Popen(argv, stdout=write, stderr=subprocess.PIPE) as proc:
        os.close(write)
        assert os.read(read, 1)  # it has started printing and waits on the full pipe
        os.close(read)
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 141, (code, err)
