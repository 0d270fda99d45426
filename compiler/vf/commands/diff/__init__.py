"""``vf diff``: what compiling now would change in a committed tree, in pipeline terms.

Input: a graph module and its committed tree. Output: a report per environment and
resource (text, Markdown or JSON).
"""
