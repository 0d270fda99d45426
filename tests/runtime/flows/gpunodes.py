"""A GPU processor for the local-grant flow: it reports the grant its worker was given."""

from __future__ import annotations

import json
import os
from typing import Any

from vf import Processor


class GrantProbe(Processor):
    """Tags each item with this replica's CUDA_VISIBLE_DEVICES, VF_GPU_COUNT and grant."""

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        return {
            "i": item["i"],
            "replica": int(os.environ["VF_REPLICA_ID"]),
            "devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "count": os.environ.get("VF_GPU_COUNT"),
            "grant": json.loads(os.environ.get("VF_GPU_GRANT_JSON", "null")),
        }
