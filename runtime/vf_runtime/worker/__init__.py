"""The worker: one replica of one node, configured only by its ``VF_*`` environment.

Input: the environment the compiler wrote, and the node's inputs on the broker. Output:
the node's outputs, end-of-stream markers and dead letters on the broker, acks for
what it settled, health on its port. Never imports ``vf_runtime.local``.
"""
