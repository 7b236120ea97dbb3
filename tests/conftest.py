import pytest
import torch

import ftcompile


@pytest.fixture(autouse=True)
def _fresh_state():
    """Each test starts with zeroed fault counters and a fresh Dynamo cache."""
    torch.manual_seed(0)
    ftcompile.reset_stats()
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def captured_sites_kept():
    """The sites a test registers as captured (ftcompile.cudagraphs: for the process's life, and
    injecting into them is refused, since a replay would not inject) are forgotten after it."""
    before = ftcompile.cudagraphs.captured_sites()
    yield
    with ftcompile.cudagraphs._lock:
        ftcompile.cudagraphs._captured.intersection_update(before)


def site(name: str, kind: str = "linear", policy: str = "correct") -> int:
    return ftcompile.register_site(name, kind, policy=policy)
