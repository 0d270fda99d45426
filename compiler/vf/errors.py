"""vf's error model: one root error with a code, the fix and the place.

Exit codes: 2 for a wrong graph, config or request; 3 for a wrong environment;
70 for a bug in vf itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

EXIT_OK = 0
EXIT_STALE = 1
EXIT_USER = 2
EXIT_ENVIRONMENT = 3
EXIT_BUG = 70
EXIT_INTERRUPTED = 130


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One thing wrong with the user's input: a code, what is wrong, the fix, and where."""

    code: str
    what: str
    remedy: str
    where: str = ""

    def render(self) -> str:
        lines = [f"error[{self.code}] {self.what}"]
        if self.where:
            lines.append(f"  --> {self.where}")
        lines.append(f"  = fix: {self.remedy}")
        return "\n".join(lines)


class VfError(Exception):
    """Root of every error vf reports to its users; carries one or more problems."""

    exit_code = EXIT_USER

    def __init__(self, code: str, what: str, remedy: str, where: str = "") -> None:
        super().__init__(what)
        self.problems: tuple[Problem, ...] = (
            Problem(code=code, what=what, remedy=remedy, where=where),
        )

    @property
    def code(self) -> str:
        return self.problems[0].code

    @classmethod
    def collect(cls, problems: Iterable[Problem]) -> VfError:
        """One error that reports every problem found in a pass."""
        items = tuple(problems)
        first = items[0]
        error = cls(first.code, first.what, first.remedy, first.where)
        error.problems = items
        return error

    def render(self) -> str:
        body = "\n".join(p.render() for p in self.problems)
        if len(self.problems) > 1:
            body += f"\n{len(self.problems)} problems found"
        return body


class EnvironmentProblem(VfError):
    """The machine vf runs on lacks something (a tool, a service); not the user's graph."""

    exit_code = EXIT_ENVIRONMENT


def raise_if(problems: list[Problem]) -> None:
    """Raise one VfError holding every problem, in a stable order, when there is any."""
    if problems:
        ordered = sorted(problems, key=lambda p: (p.where, p.code, p.what))
        raise VfError.collect(ordered)
