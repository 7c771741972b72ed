"""The extension's unit-test fixtures (extension/test/fixtures/) are what mirage_lab writes today.

The TypeScript tests read saved JSON, so a change to the μGraph format or to the seed examples
would leave them testing a stale shape; this test (no browser needed) catches that drift.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirage_lab import examples as ex

FIXTURES = Path(__file__).resolve().parents[2] / "extension" / "test" / "fixtures"
REGEN = (
    ".venv/bin/python -c \"from mirage_lab import examples as ex; "
    "open('extension/test/fixtures/NAME.json','w').write(ex.NAME().to_json(indent=1)+'\\n')\""
)


@pytest.mark.parametrize("name", ["rms_norm_linear_fused", "gqa_flashdecoding"])
def test_fixture_matches_current_json(name):
    saved = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    current = json.loads(getattr(ex, name)().to_json())
    assert saved == current, f"extension/test/fixtures/{name}.json is stale; regenerate it with:\n{REGEN.replace('NAME', name)}"
