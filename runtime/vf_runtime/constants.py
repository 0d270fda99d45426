"""Flow types and device kinds shared by the compiler and the workers."""

from typing import Final

BATCH: Final = "batch"
REALTIME: Final = "realtime"
FLOW_TYPES: Final = (BATCH, REALTIME)

CPU: Final = "cpu"
GPU: Final = "gpu"
DEVICE_TYPES: Final = (CPU, GPU)

ENVELOPE_VERSION: Final = 4
HEALTH_PORT: Final = 8080
