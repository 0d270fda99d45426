"""The front end: run the user's graph module and lower its Flow to the Graph IR.

Input: a graph module path (``graph.py[:factory]``). Output: a frozen, validated
``Graph`` (nodes, edges, flow type), every broken graph rule reported in one pass.
The only package that executes user code.
"""
