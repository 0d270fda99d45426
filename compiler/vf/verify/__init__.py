"""Verification: every problem of a plan and its objects, found in one pass.

Input: the plans and their rendered objects. Output: nothing when they hold; else the
problems (plan schema, API server limits, flows colliding in a namespace), each with
its fix.
"""
