"""Running a flow on one machine: embedded servers, worker supervision, cleanup on exit.

Input: a local run's workers and servers. Output: processes that live and die with the
run. Used by ``vf run-local`` and ``vf run-tree``, never by a worker.
"""
