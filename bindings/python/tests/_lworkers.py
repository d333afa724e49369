"""Functions of the log tests run in child processes (importable under spawn)."""

import logging
import os
import signal

import shoal


def write_through_handler(path, writer, n):
    """Logs `n` records through a shoal.LogHandler, each naming its writer and number."""
    s = shoal.open(path, create=False)
    logger = logging.getLogger(f"writer{writer}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(shoal.LogHandler(s.log("app")))
    for i in range(n):
        logger.info("record %d of writer %d", i, writer, extra={"writer": writer, "n": i})


def read_then_die(path, n):
    """Reads `n` records as the reader "drain", notes their sequence numbers in the map
    "seen", then kills itself (no clean exit: the cursor must already be in the file)."""
    s = shoal.open(path, create=False)
    seen = s.map("seen", key="int", value="int")
    r = s.log("app").reader("drain")
    for _ in range(n):
        rec = r.read_wait(60)
        assert rec is not None
        seen[rec.seq] = 1
    os.kill(os.getpid(), signal.SIGKILL)
