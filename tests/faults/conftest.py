"""The fault suite's fixtures: a Docker client and one extended dev stack for the suite (its cases run in file order)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import docker
import pytest

from tests.faults.disks import StateDisks
from tests.faults.harness import STACK_ENV, FaultStack
from tests.support.dev_stack import DevStackProcess
from tests.support.docker import RUN_ID, cleanup, docker_client
from tests.support.services import require_binary


@pytest.fixture(scope="package")
def client() -> Iterator[docker.DockerClient]:
    c = docker_client()
    yield c
    c.close()


@pytest.fixture(scope="package")
def faults(client: docker.DockerClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:
    require_binary("mosquitto", "mosquitto")
    root = tmp_path_factory.mktemp("faults")
    disks = StateDisks(root / "state")  # case 8 fills them; mounted before the stack writes
    try:
        stack = DevStackProcess(root, env=STACK_ENV)
    except BaseException:
        disks.unmount()
        raise
    run = f"{RUN_ID}-faults-{stack.prefix}"
    f = FaultStack(stack, client, run, disks)
    try:
        stack.wait_ready()
        f.settle("the sample converged", 120)
        f.extend()
        yield f
    finally:
        down = ""
        try:
            if disks.mounted:  # --down reads the host processes' records there: unmount after it
                try:
                    stack.stop()
                finally:  # --down also stops a stack that stop() left running
                    argv = [*stack.phrame_dev(), "--down"]
                    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
                    down = done.stdout + done.stderr
                    disks.unmount()
        finally:
            down += stack.close()
            cleanup(client, run)
        left = [c.name for c in f.managed()]
        assert not left, f"phrame dev --down --purge left {left}:\n{down}"
