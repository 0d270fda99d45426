"""vf's text templates render to what Jinja2 renders (ADR 0134): the subset the compile
renders itself, checked against Jinja2 with vf's delimiters and whitespace rules on tricky
sources and on every shipped template of the chart and the tree README."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vf.emit.helm.text import escape_go
from vf.resources import resource_dir, templates
from vf.textio.texttemplate import parse, shipped

SOURCES = (
    "a\n  [# c #]\nb",
    "a [% if x %]y[% endif %]\nz",
    "  [% if x %]\n  y\n  [% endif %]\nz\n",
    "[% for a in l %][[ a ]]  [% endfor %]\n",
    "x[% if x %]\n\n[% endif %]\n",
    "  [[ x ]]\n",
    "\t[% if x %] t\n[% endif %]",
    "[% for a, b in p %][[a]]=[[ b ]]\n[% endfor %]",
    "[[ n|length ]] [[ l|join(', ') ]] [% if l|length <= 2 %]s[% else %]m[% endif %]",
    '[[ none ]] [[ t ]] [[ d.k ]] [[ l|join("") ]]',
    "[% if x %]a[% endif %]  [% if x %]\nb[% endif %]",
    "[# a\n b #]  \nc",
    "[% if not x %]n[% else %]\n  y[% endif %]",
    "  [# c #]  [% if x %]\nq[% endif %]",
    "\n\n  [% for a in l %]\n  - [[ a ]]\n  [% endfor %]\n\n",
    "[% for a in l %][% if a > 1 %][[ a ]][% endif %][% endfor %]",
)
CONTEXT = {"x": True, "l": [1, 2, 3], "p": [("a", 1)], "n": "abc", "none": None, "t": True}


def _jinja(source: str, context: dict[str, Any]) -> str:
    """Jinja2 as vf configures it for its templates (delimiters, whitespace rules)."""
    return templates("tree").from_string(source).render(**context)


@pytest.mark.parametrize("source", SOURCES)
def test_a_source_renders_as_jinja2_renders_it(source: str) -> None:
    context = {**CONTEXT, "d": {"k": "v"}}
    assert parse(source, name="t").render(context) == _jinja(source, context)


TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
ENV = st.fixed_dictionaries(
    {
        "name": TEXT,
        "namespace": TEXT,
        "kubernetes": TEXT,
        "broker": TEXT,
        "store": TEXT,
        "gpu": TEXT,
        "replicas": TEXT,
        "argocd": st.one_of(st.just(""), TEXT),
        "flux": st.one_of(st.just(""), TEXT),
        "source": TEXT,
    }
)
CONTEXTS = st.fixed_dictionaries(
    {
        "name": TEXT,
        "flow_id": TEXT,
        "flow_type": st.sampled_from(["BATCH", "REALTIME"]),
        "chart": TEXT,
        "diagram": st.one_of(st.just(""), TEXT),
        "too_large": TEXT,
        "gitops": st.booleans(),
        "environments": st.lists(ENV, max_size=3),
        "nodes": st.lists(TEXT, max_size=25),
        "kinds": st.lists(st.tuples(TEXT, st.integers(0, 5000)), max_size=4),
    }
)


@given(context=CONTEXTS)
@settings(max_examples=60, deadline=None)
def test_every_shipped_template_renders_as_jinja2_renders_it(context: dict[str, Any]) -> None:
    for folder, filters in (("helm", {"go": escape_go}), ("tree", {})):
        env = templates(folder)
        env.filters.update(filters)
        for path in sorted((resource_dir("templates") / folder).glob("*.j2")):
            name = path.name.removesuffix(".j2")
            expected = env.get_template(path.name).render(**context)
            assert shipped(folder, name).render(context, filters=filters) == expected, name


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("[% set a = 1 %]", "not in vf's template subset"),
        ("[% if x %]a", "never closed"),
        ("[% endfor %]", "not in vf's template subset"),
        ("[[ a + b ]]", "cannot read the expression"),
        ("[% for in x %][% endfor %]", "cannot read"),
    ],
)
def test_a_tag_outside_the_subset_is_refused_by_name(source: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse(source, name="t")


def test_an_undefined_name_or_filter_is_an_error_not_empty_text() -> None:
    with pytest.raises(ValueError, match="'missing' is undefined"):
        parse("[[ missing ]]", name="t").render({})
    with pytest.raises(ValueError, match="no filter 'upper'"):
        parse("[[ a|upper ]]", name="t").render({"a": "x"})
