"""Random layered flows for the tests that hold vf to graphs no example has.

A flow has one or two producers and up to six processors; each processor reads the oldest
node nothing reads yet and maybe one more (a join, then partitioned), and every processor
left unread ends in a consumer, so every node feeds the flow. Producers emit ``n`` numbered
items; processors pass their first input on; a consumer given a path appends each number
to it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)  # one flow per seed, reproducible


def seeded(examples: int) -> settings:
    """Hypothesis settings for a test that compiles, renders or runs one flow per seed:
    slow examples, a temporary folder per example."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


NODES = '''"""Node classes of the generated flows."""

from vf import Consumer, Processor, Producer


class Src(Producer):
    def __init__(self, n=3, **kw):
        super().__init__(**kw)
        self.n = n
        self.sent = 0

    def next(self):
        if self.sent >= self.n:
            raise StopIteration
        self.sent += 1
        return {"i": self.sent}


class Work(Processor):
    def __init__(self, k=1, **kw):
        super().__init__(**kw)
        self.k = k

    def process(self, *items):
        return items[0]


class Sink(Consumer):
    def __init__(self, path=None, **kw):
        super().__init__(**kw)
        self.path = path

    def consume(self, item):
        if self.path is not None:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(f"{item['i']}\\n")
'''


@dataclass(frozen=True, kw_only=True)
class RandomFlow:
    """A generated graph module and what the tests need to know of it."""

    source: str  # the graph module's text
    works: tuple[str, ...]  # the processors
    partitioned: tuple[str, ...]  # the joins among them
    sinks: tuple[str, ...]
    items: int  # what each producer emits
    kind: str  # BATCH or REALTIME


def layered_flow(
    rng: random.Random,
    *,
    flow_id: str,
    sources: int | None = None,
    kind: str | None = None,
    sink_dir: str | None = None,
) -> RandomFlow:
    """A random flow: ``sources`` producers (else one or two), of ``kind`` (else either);
    with ``sink_dir`` each consumer appends to ``<sink_dir>/<name>.txt``."""
    lines = ["from nodes import Sink, Src, Work", "from vf import BATCH, REALTIME, Flow", ""]
    lines.append("def build_flow():")
    names: list[str] = []
    unread: list[str] = []
    items = 0
    for i in range(sources if sources is not None else rng.randint(1, 2)):
        items = rng.randint(1, 9)
        lines.append(f"    s{i} = Src(name='s{i}', n={items})")
        names.append(f"s{i}")
        unread.append(f"s{i}")
    works, partitioned = [], []
    for i in range(rng.randint(1, 6)):
        parents = {unread[0], *rng.sample(names, k=min(len(names), rng.choice([1, 1, 2])))}
        args = [f"name='w{i}'", f"k={rng.randint(0, 5)}", f"nb_tasks={rng.choice([1, 1, 2, 3])}"]
        if len(parents) > 1:
            args.append("partition_by='trace_id'")
            partitioned.append(f"w{i}")
        lines.append(f"    w{i} = Work({', '.join(args)})({', '.join(sorted(parents))})")
        unread = [n for n in unread if n not in parents] + [f"w{i}"]
        names.append(f"w{i}")
        works.append(f"w{i}")
    sinks = []
    for j, leaf in enumerate(n for n in unread if n.startswith("w")):
        path = "" if sink_dir is None else f", path={f'{sink_dir}/k{j}.txt'!r}"
        lines.append(f"    k{j} = Sink(name='k{j}'{path})({leaf})")
        sinks.append(f"k{j}")
    kind = kind if kind is not None else rng.choice(["BATCH", "REALTIME"])
    lines.append(f"    return Flow([{', '.join(sinks)}], flow_type={kind}, flow_id={flow_id!r})")
    return RandomFlow(
        source="\n".join(lines) + "\n",
        works=tuple(works),
        partitioned=tuple(partitioned),
        sinks=tuple(sinks),
        items=items,
        kind=kind,
    )
