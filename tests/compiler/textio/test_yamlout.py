"""Canonical YAML: reads back as the same data under YAML 1.1 and 1.2, and stays stable."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from vf.runtree.manifests import parse_objects
from vf.textio import yamlout

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(
        ["on", "off", "yes", "No", "0755", "1e3", "~", "null", ".5", "-", "a: b", "#x"]
    ),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=25,
)


def _load(text: str, version: tuple[int, int]) -> Any:
    yaml = YAML(typ="safe", pure=True)
    yaml.version = version
    return yaml.load(text)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=12), documents, min_size=1, max_size=5))
def test_round_trips_under_yaml_1_1_and_1_2(document: dict[str, Any]) -> None:
    text = yamlout.dump(document)
    assert text.endswith("\n") and not text.endswith("\n\n")
    for version in ((1, 1), (1, 2)):
        assert _load(text, version) == document


def test_top_level_key_order() -> None:
    text = yamlout.dump(
        {"spec": {"b": 1, "a": 2}, "metadata": {"name": "x"}, "kind": "K", "apiVersion": "v1"}
    )
    assert text.splitlines()[:3] == ["apiVersion: v1", "kind: K", "metadata:"]
    assert text.index("a: 2") < text.index("b: 1")


def test_yaml_1_1_words_stay_strings() -> None:
    text = yamlout.dump({"data": {"a": "on", "b": "0755", "c": "yes", "d": "1:20"}})
    assert '"on"' in text and '"0755"' in text and '"yes"' in text and '"1:20"' in text


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        alphabet=st.one_of(
            st.characters(max_codepoint=0x2FF, exclude_categories=("Cs",)),
            st.characters(min_codepoint=0x10000, exclude_categories=("Cs",)),
            st.sampled_from(['"', "\\", "\n", "\t", "\r", "\x00", "\x7f", "\x85", "\ufeff"]),
        ),
        max_size=30,
    )
)
def test_every_escape_reads_back(text: str) -> None:
    quoted = yamlout.quote(text)
    assert quoted.isascii() and quoted.isprintable()
    for version in ((1, 1), (1, 2)):
        assert _load(f"k: {quoted}\n", version) == {"k": text}


_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escaped_by_hand(text: str) -> str:
    """The canonical form of ASCII text: short escapes, ``\\xNN`` for other controls."""
    out = []
    for char in text:
        if char in _SHORT:
            out.append(_SHORT[char])
        elif not " " <= char <= "~":
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.one_of(
            st.characters(max_codepoint=0x7F, exclude_categories=("Cs",)),
            st.sampled_from(['"', "\\", "\n", "\t", "\r", "\x00", "\x1b", "\x7f"]),
        ),
        max_size=40,
    )
)
def test_ascii_escapes_keep_their_canonical_form(text: str) -> None:
    """Text of many lines (a topology ConfigMap's) is escaped at C speed; the bytes are
    those of one escape per character, as they always were."""
    assert yamlout.quote(text) == _escaped_by_hand(text)


def test_a_long_text_of_many_lines_is_one_quoted_line() -> None:
    line = '{"name":"p-1","parents":["src"]}'
    quoted = yamlout.quote("\n".join([line] * 3) + "\tend\r")
    assert quoted == '"' + "\\n".join([line.replace('"', '\\"')] * 3) + '\\tend\\r"'


def test_what_kustomize_leaves_unquoted_is_read_as_kubernetes_tools_read_it() -> None:
    """kustomize writes a quoted ``"6e56571281414078"`` (a config hash) back unquoted, since
    Go's YAML takes a number too large for a double as text; vf reads rendered manifests the
    same way, and still reads ``.inf`` and numbers in range as numbers."""
    text = (
        "kind: ConfigMap\nmetadata:\n  annotations:\n    vf.dev/config-hash: 6e56571281414078\n"
        "data:\n  big: 1e400\n  neg: -2E999\n  small: 1e10\n  inf: .inf\n  quoted: '1e400'\n"
    )
    (obj,) = parse_objects(text, source="kustomize")
    assert obj["metadata"]["annotations"]["vf.dev/config-hash"] == "6e56571281414078"
    assert obj["data"] == {
        "big": "1e400",
        "neg": "-2E999",
        "small": 1e10,
        "inf": float("inf"),
        "quoted": "1e400",
    }
