"""docs/configuration.md lists every key vf.yaml's schema accepts: its "Every key" section
is generated from the schema, and must be what the generator writes today."""

from __future__ import annotations

from tests.support import REPO
from vf.config.reference import BEGIN, END, reference

DOC = REPO / "docs" / "configuration.md"


def test_the_reference_lists_every_key_of_the_schema() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "docs/configuration.md has no generated key table"
    committed = text[text.index(BEGIN) : text.index(END) + len(END)] + "\n"
    assert committed == reference(), "regenerate it: python -m vf.config.reference"


def test_the_keys_a_newcomer_looked_for_are_there() -> None:
    table = reference()
    for key in ("mounts", "rollout", "supervision", "gpu", "requirements", "provision_image"):
        assert f"`environments.ENV.{key}`" in table, key
