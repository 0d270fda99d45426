"""The deployment targets: read and check ``vf.yaml``.

Input: the ``vf.yaml`` text beside a graph module. Output: frozen ``Targets`` per
environment (broker, store, GPUs, network, pods, workloads, delivery), each problem
reported with its place.
"""
