"""Which records an operator command is about: one selection for every command.

``vf dlq ls``, ``show``, ``replay``, ``purge`` and ``vf teardown`` take the same selector
options (``--flow``, ``--run``, ``--generation``, ``--node``, ``--code``) and decide what
they match with :meth:`Selector.selects`, so the same options always name the same
records, whether the command lists them or deletes them. A selector is either absent
(matches everything) or an exact, non-empty value: an empty or whitespace value is
refused when the options are parsed (``VF_SELECTOR_EMPTY``), never read as "absent",
so a script with an unset variable cannot widen a destructive command.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from vf.errors import EXIT_USER, VfError

F = TypeVar("F", bound=Callable[..., Any])

SELECTORS = ("flow", "run", "generation", "node", "code")
_WILDCARDS = frozenset("*>")


def selector_problem(option: str, value: str) -> VfError | None:
    """Why ``value`` cannot select anything (empty, blank, spaces, a wildcard), or None."""
    if not value.strip():
        return VfError(
            "VF_SELECTOR_EMPTY",
            f"{option} is empty ({value!r}); an empty selector would match nothing or "
            "everything, so it is refused",
            f"give {option} a value, or leave the option out to select every record "
            "(check the shell variable that was meant to hold it)",
            option,
        )
    odd = [c for c in value if c.isspace() or not c.isprintable() or c in _WILDCARDS]
    if odd:
        return VfError(
            "VF_SELECTOR_MALFORMED",
            f"{option} {value!r} holds {odd[0]!r}; selectors are exact names, not patterns",
            f"pass {option} exactly as vf runs or vf dlq ls prints it",
            option,
        )
    return None


def _checked(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    problem = selector_problem(param.opts[0], value)
    if problem is not None:
        click.echo(problem.render(), err=True)
        ctx.exit(EXIT_USER)
    return value


def checked_many(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    """A repeatable selector: each value is checked as one."""
    for value in values:
        _checked(ctx, param, value)
    return values


def selector_option(name: str, help_text: str, *, required: bool = False) -> Callable[[F], F]:
    """``--NAME VALUE``, checked as it is parsed."""
    return click.option(
        f"--{name}",
        name,
        required=required,
        default=None,
        metavar=name.upper(),
        callback=_checked,
        help=help_text,
    )


def selectors(func: Any) -> Any:
    """``--run``, ``--generation``, ``--node``, ``--code``: the same on every dlq command."""
    for name, text in reversed(
        (
            ("run", "Only this run id."),
            ("generation", "Only this generation of the run."),
            ("node", "Only this origin node."),
            ("code", "Only this error code."),
        )
    ):
        func = selector_option(name, text)(func)
    return func


@dataclass(frozen=True, kw_only=True)
class Selector:
    """The records a command is about; a field left None matches every value."""

    flow: str
    run: str | None = None
    generation: str | None = None
    node: str | None = None
    code: str | None = None

    def selects(
        self, *, run: str, generation: str, node: str | None = None, code: str | None = None
    ) -> bool:
        """Whether a record of this flow with these fields is selected. ``node`` and
        ``code`` are None for a run (which has neither); a run is selected when it is the
        run and generation asked for, whatever node or code filters say about its
        records."""
        return (
            (self.run is None or run == self.run)
            and (self.generation is None or generation == self.generation)
            and (node is None or self.node is None or node == self.node)
            and (code is None or self.code is None or code == self.code)
        )

    def describe(self) -> str:
        """``flow F run R node N`` for messages."""
        parts = [f"{key} {getattr(self, key)}" for key in SELECTORS if getattr(self, key)]
        return " ".join(parts)
