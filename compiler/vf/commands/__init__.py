"""The ``vf`` subcommands beyond compile: what they do around the compiler facade.

Input: a command's arguments (graph, tree, cluster or broker). Output: what the command
prints, writes or runs; those that compile call ``vf.pipeline`` rather than wiring the
stages themselves.
"""
