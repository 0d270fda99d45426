"""The records stages hand each other: the Graph IR, the Plan IR and what they hold.

Input: nothing; these are frozen, keyword-only dataclasses and their JSON form.
Output: the types the front end makes (``graph``), the planner makes (``plan``, ``gpu``,
``security``), vf.config makes for the Plan and the emitters (``records``, ``delivery``),
and the renderers, emitters and ``verify`` read. The IR imports no stage.
"""
