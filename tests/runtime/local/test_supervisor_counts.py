"""run-local's progress counts: a replica's counts survive its exit and add up over restarts."""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

from vf_runtime.local.supervisor import (
    ReplicaSpec,
    SuperviseOptions,
    SupervisionPolicy,
    Supervisor,
)

# First life: counts 3 and crashes; second life: counts 2 and ends. Neither serves /metrics,
# so only their last lines (the worker's summary) tell what they did.
WORKER = """
import sys
from pathlib import Path
flag = Path(sys.argv[1])
if flag.exists():
    print("INFO vf.worker summary: processed=2 received=2 publish_retries=0 cpu_seconds=0.01")
    sys.exit(0)
flag.write_text("x")
print("INFO vf.worker summary: processed=3 received=3 publish_retries=1 cpu_seconds=0.02")
sys.exit(1)
"""


def test_counts_add_up_over_a_restart_and_outlive_the_exit(tmp_path: Path) -> None:
    out = io.StringIO()
    spec = ReplicaSpec(
        node="reader",
        replica=0,
        env={},
        command=(sys.executable, "-c", WORKER, str(tmp_path / "lived")),
    )
    options = SuperviseOptions(
        announce_stop=lambda: None,
        policy=SupervisionPolicy(max_restarts=1, backoff=(0.0,)),
        stall_seconds=None,
        output=out,
    )
    supervisor = Supervisor([spec], options)
    assert supervisor.run().status == "ok"
    supervisor.reported_at = time.monotonic() - 60  # due for a progress line
    assert supervisor.progress() == 10  # processed 3 + 2, received 3 + 2
    assert out.getvalue().splitlines()[-1] == "[vf] progress: reader 5"
