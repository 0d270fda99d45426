"""Errors raised while a graph is being authored."""


class AuthoringError(ValueError):
    """A node, policy or flow was declared with values vf cannot honour.

    ``code`` names the rule; ``remedy`` says how to fix the declaration.
    """

    def __init__(self, code: str, message: str, remedy: str) -> None:
        super().__init__(message)
        self.code = code
        self.remedy = remedy
