"""``vf inventory``: a live cluster's GPU pool read through ``kubectl``, read-only.

Input: a kube context. Output: ``gpu.inventory`` entries, printed or written into ``vf.yaml``.
"""
