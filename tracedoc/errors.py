"""Error types. Every error tracedoc raises on purpose carries the process exit code
the CLI must use, so bad input never reaches the user as a traceback."""

from __future__ import annotations


class TracedocError(Exception):
    """Base class of tracedoc's own errors.

    Attributes:
        exit_code: process exit code the CLI uses for this error (2: bad input or usage).
    """

    exit_code = 2


class TraceLoadError(TracedocError):
    """A trace file cannot be read or is not a usable Kineto/Chrome trace.

    The message is one line and names the file and the problem, e.g.
    ``trace.json.gz: truncated gzip stream``.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class RuleError(TracedocError):
    """A rule file is malformed (bad TOML, unknown signal, disallowed expression)."""
