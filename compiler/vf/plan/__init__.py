"""The planner: every decision for one environment, made once.

Input: the Graph IR and one environment's target. Output: a frozen ``Plan`` (the IR in
``vf.ir.plan``): names, workloads, channels and their admission, env per worker,
security reach, infrastructure; ``vf.plan.gpu`` decides the GPU layout.
"""
