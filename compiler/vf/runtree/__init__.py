"""``vf run-tree``: run the committed tree the way a cluster runs it, as local processes.

The objects come from the real renderers (``kubectl kustomize`` of an overlay, or
``helm template`` with an environment's values); small controllers play the parts of
the Job, Deployment and StatefulSet controllers, the kubelet (processes, probes,
restarts) and Services (loopback proxies). See ``docs/run-tree.md``.

Input: a committed tree, an environment and the project folder (``--app``). Output: the
run's processes or containers, its log and outcome. It reads the tree's files, never the
compile stages (an import contract, ADR 0174).
"""
