"""Operator commands: what an on-call engineer runs against a flow's broker and store.

Dead letters (``vf dlq``), the runs a broker holds (``vf runs``), reclaiming them
(``vf teardown``) and reading an envelope (``vf debug decode``). Names come from
``vf_runtime.broker.naming`` and ownership from the metadata vf writes on every stream
(PROTOCOL STREAM-1); nothing here guesses from a name prefix.
"""
