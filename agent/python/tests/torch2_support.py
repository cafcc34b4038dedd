"""What the tests that need torch >= 2 share: whether this torch is 2.x, and the skip that the
torch 2 job (tools/check_torch2, TRACETORCH_TORCH2_JOB=1) turns into a failure, so that a missing
prerequisite there cannot pass as a skip."""

from __future__ import annotations

import os

import pytest
import torch

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
IN_TORCH2_JOB = os.environ.get("TRACETORCH_TORCH2_JOB") == "1"


def needs(condition: bool, reason: str) -> None:
    """Skips the calling test unless `condition`; in the torch 2 job, fails it instead."""
    if condition:
        return
    if IN_TORCH2_JOB:
        pytest.fail(f"the torch 2 job must run this test: {reason}")
    pytest.skip(reason)


def needs_torch2() -> None:
    needs(TORCH2, f"needs torch >= 2 (this is {torch.__version__}); runs in tools/check_torch2")
