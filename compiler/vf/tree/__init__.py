"""The output tree on disk: write it all or nothing, and read a committed one back.

Input: the emitted files (or a tree directory). Output: the tree swapped in atomically
(or the plans and objects read back). The only package that writes the output directory.
"""
