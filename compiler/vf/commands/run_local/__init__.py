"""``vf run-local``: run a flow on this machine from the same plan the cluster gets.

Input: a graph module and an environment. Output: one worker process per replica
against local servers, and a run that reports truthfully how it ended.
"""
