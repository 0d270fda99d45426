"""GPU planning: exclusive cards, MIG slices (mix) or DRA claims, per environment.

Input: the GPU workloads of a plan and the target's declared inventory. Output: the
plan's GPU decisions (grants, MIG geometry, DRA claims), or a named infeasibility.
"""
