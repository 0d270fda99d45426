"""The broker: NATS JetStream names, stream settings, connections and provisioning.

Input: a run's identity (flow, run, generation) and a broker URL. Output: the run's
streams, durables and DLQ ensured idempotently, and the names every party derives alike.
"""
