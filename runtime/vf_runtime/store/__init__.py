"""The payload store: large payloads offloaded to Redis, and idempotent consumers' records.

Input: payload bytes and a store URL. Output: references a message can carry, released
once every reader settled.
"""
