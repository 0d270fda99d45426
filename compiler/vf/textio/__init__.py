"""Text in and out: canonical YAML and JSON, bounded YAML reading, schema checkers.

Input: data or user text. Output: byte-stable text, or data with each syntax problem
placed. Imports no other vf package.
"""
