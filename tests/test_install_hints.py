"""Every install hint names both ways in: from PyPI and from a clone (issue "What a person sees")."""

from __future__ import annotations

import re
from pathlib import Path

from tracedoc.errors import install_hint

PKG = Path(__file__).resolve().parents[1] / "tracedoc"


def test_install_hint_names_both_forms():
    assert install_hint("html") == "pip install 'tracedoc[html]' (from a clone: pip install -e '.[html]')"


def test_no_message_builds_a_one_sided_hint():
    """A user-facing string with ``pip install 'tracedoc[...]'`` must come from install_hint()
    (docstrings and comments may still name the PyPI form)."""
    one_sided = []
    for path in PKG.rglob("*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(r"""["']pip install 'tracedoc\[|[(:] pip install 'tracedoc\[\w+\]'\)?["']""", code):
                if "from a clone" not in code and "``" not in code:
                    one_sided.append(f"{path.relative_to(PKG.parent)}:{n}: {line.strip()}")
    assert one_sided == []


def test_missing_plotly_message(monkeypatch):
    import builtins

    import pytest

    from tracedoc.errors import TracedocError
    from tracedoc.render import html

    real = builtins.__import__

    def no_plotly(name, *a, **k):
        if name.startswith("plotly"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_plotly)
    with pytest.raises(TracedocError) as e:
        html._plotly()
    assert "pip install 'tracedoc[html]'" in str(e.value) and "pip install -e '.[html]'" in str(e.value)
