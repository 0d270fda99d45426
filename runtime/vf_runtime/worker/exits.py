"""A worker's exit codes (PROTOCOL.md LIFE-5), read by whatever supervises it: Kubernetes,
``vf run-local`` and ``vf run-tree``."""

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_BROKER, EXIT_STOPPED = 0, 1, 2, 3, 4
EXIT_ABORTED = 5  # the replica ended on an abort of a parent replica (EOS-5)
EXIT_HUNG = 6  # a node call did not return within its bound (DELIV-12, VF_NODE_HUNG)
