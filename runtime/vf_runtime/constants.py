"""Flow types and device kinds shared by the compiler and the workers."""

from typing import Final, Literal

FlowType = Literal["batch", "realtime"]
DeviceType = Literal["cpu", "gpu"]
NodeKind = Literal["producer", "processor", "consumer"]

BATCH: Final[FlowType] = "batch"
REALTIME: Final[FlowType] = "realtime"
FLOW_TYPES: Final = (BATCH, REALTIME)

CPU: Final[DeviceType] = "cpu"
GPU: Final[DeviceType] = "gpu"
DEVICE_TYPES: Final = (CPU, GPU)

ENVELOPE_VERSION: Final = 4
HEALTH_PORT: Final = 8080
# Seconds the broker waits for an ack before it redelivers: a consumer's ack_wait when
# provisioned, and a worker's VF_ACK_WAIT_SECONDS when that is unset.
DEFAULT_ACK_WAIT: Final = 60.0
# Messages a BATCH stream keeps (its max_msgs): the broker's topology and the compiler's
# admission both read it, the compiler without loading the NATS client.
BATCH_MAX_MSGS: Final = 10_000
# Retries that delay messages without spending their delivery budget, each a metric of the
# worker's and an alert of the compiler's (broker_full: VF_BROKER_FULL, within publish).
RETRIES: Final = ("publish", "store", "broker_full")
