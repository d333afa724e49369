import os
import uuid

import pytest

import shoal


def _shm_dir():
    return "/dev/shm" if os.path.isdir("/dev/shm") else None


@pytest.fixture
def path(tmp_path):
    """A fresh store path (in /dev/shm when there is one), removed afterwards."""
    d = _shm_dir()
    p = os.path.join(d, f"shoal-pytest-{os.getpid()}-{uuid.uuid4().hex}.shoal") if d else str(tmp_path / "s.shoal")
    yield p
    shoal.remove(p, missing_ok=True)


@pytest.fixture
def store(path):
    s = shoal.open(path)
    yield s
    s.close()
