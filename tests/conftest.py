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


def site(name: str, kind: str = "linear", policy: str = "correct") -> int:
    return ftcompile.register_site(name, kind, policy=policy)
