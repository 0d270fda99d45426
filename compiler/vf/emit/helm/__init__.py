"""The Helm chart: ``chart/`` with templates, a strict values schema and per-environment values.

Input: each environment's objects. Output: the chart's files, which render with
``values-<env>.yaml`` to that environment's objects.
"""
