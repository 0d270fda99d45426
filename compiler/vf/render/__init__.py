"""Rendering: a Plan into Kubernetes objects (plain dicts), in a stable order.

Input: a verified Plan. Output: its objects, and the flow's diagram model; renderers
read the Plan only, never the Graph or the config.
"""
