"""The ``vf`` subcommands beyond compile: what they do around the compiler facade.

Input: a command's arguments (graph, tree, cluster or broker). Output: what the command
prints, writes or runs; each calls ``vf.pipeline`` rather than wiring stages itself.
"""
