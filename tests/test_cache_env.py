"""Every ``TRACEDOC_*`` variable with a value it cannot take is one line naming it, exit 2
(issue 21, "The frame cache": the cache size variables and the others read by
``settings.Environment``), never "<trace>: cannot analyze (ValueError)".

The rule, for any text: :meth:`Environment.read` either accepts it (and then the consumer
can use the value) or raises a one-line :class:`SettingsError` that starts with the
variable's name; and the command line turns a refused value into exactly that line on
stderr and exit 2, whatever the command.
"""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import FIXTURES, REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from tracedoc.errors import SettingsError
from tracedoc.load.source import parse_size
from tracedoc.settings import Environment

SIZES = ["MAX_TRACE_BYTES", "CACHE_MIN_BYTES", "CACHE_MAX_BYTES"]
FLAGS = ["NO_CONFIG", "NO_PROGRESS", "DEBUG"]
VARIABLES = [*SIZES, *FLAGS, "DASK_TIMEOUT"]
#: texts near the accepted forms (sizes, flags, durations) and anything at all
TEXTS = st.one_of(
    st.text(max_size=12),
    st.from_regex(r"\s*-?\d{0,4}(\.\d?)?\s*[kmgtKMGT]?[iI]?[bB]?\s*", fullmatch=True),
    st.from_regex(r"(?i)\s*(yes|no|on|off|true|false|0|1|2|maybe)\s*", fullmatch=True),
    st.from_regex(r"(?i)\d{0,3}(\.\d)?\s?(s|ms|us|m|h|d|w|sec|seconds|minutes?|x)?", fullmatch=True),
)


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(VARIABLES), text=TEXTS)
def test_a_variable_is_accepted_usable_or_refused_by_name(name, text):
    var = f"TRACEDOC_{name}"
    try:
        env = Environment.read({var: text})
    except SettingsError as exc:
        msg = str(exc)
        assert msg.startswith(f"${var}: ") and "\n" not in msg and text.strip()
        return
    value = {
        "MAX_TRACE_BYTES": env.max_trace_bytes,
        "CACHE_MIN_BYTES": env.cache_min_bytes,
        "CACHE_MAX_BYTES": env.cache_max_bytes,
        "NO_CONFIG": env.no_config,
        "NO_PROGRESS": env.no_progress,
        "DEBUG": env.debug,
        "DASK_TIMEOUT": env.dask_timeout,
    }[name]
    if not text.strip():
        assert value in (None, False)  # empty is unset
    elif name in SIZES:
        assert value == (0 if text.strip() == "0" else parse_size(text)) and value >= 0
    elif name == "DASK_TIMEOUT":
        from dask.utils import parse_timedelta

        assert parse_timedelta(value) > 0  # Dask itself takes it
    else:
        assert isinstance(value, bool)


def _refused(name: str, text: str) -> bool:
    try:
        Environment.read({f"TRACEDOC_{name}": text})
    except SettingsError:
        return True
    return False


COMMANDS = [
    ["analyze", str(FIXTURES / "cpu_only_gloo.pt.trace.json.gz")],
    ["analyze", str(FIXTURES / "cpu_only_gloo.pt.trace.json.gz"), str(FIXTURES / "mi250_toy_train.pt.trace.json.gz")],
    ["cache", "info"],
    ["cache", "clear"],
]


@settings(max_examples=12, deadline=None)
@given(
    name=st.sampled_from(VARIABLES),
    text=TEXTS.filter(lambda t: "\x00" not in t and t.strip()),
    command=st.sampled_from(COMMANDS),
)
def test_the_command_line_says_which_variable_in_one_line(tmp_path_factory, name, text, command):
    if not _refused(name, text):
        text = text + " apples"  # now refused: no size, flag or duration ends so
    assert _refused(name, text)
    var = f"TRACEDOC_{name}"
    home = tmp_path_factory.mktemp("home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEDOC_")}
    env.update({var: text, "XDG_CACHE_HOME": str(home)})  # cache clear: never the user's cache
    r = subprocess.run(
        [sys.executable, "-m", "tracedoc", *command], capture_output=True, text=True, env=env, timeout=120, cwd=REPO
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert len(lines) == 1 and lines[0].startswith(f"tracedoc: error: ${var}: "), r.stderr
    assert "cannot analyze" not in r.stderr and "Traceback" not in r.stderr
