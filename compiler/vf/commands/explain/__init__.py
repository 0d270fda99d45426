"""``vf explain`` and ``vf validate``: the plans summarised for people and for tools.

Input: the compiled plans. Output: text, JSON or a diagram.
"""
