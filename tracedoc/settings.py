"""Every analysis option in one picklable object, resolved once.

:meth:`Settings.resolve` reads ``[tool.tracedoc]`` the way the CLI always has (the closest
``pyproject.toml`` with that table, upward from the trace's folder, then upward from the
working directory: :func:`tracedoc.config.find_config`) and lets explicit options win. The
result goes to every entry point (the CLI, :func:`tracedoc.analyze`, rank jobs, fix-loop
trials, ``tracedoc diff``) through :func:`tracedoc.pipeline.analyze`, so one project gets one
set of findings whichever road it takes.

The ``TRACEDOC_*`` environment variables are read in one place, :meth:`Environment.read`,
validated there (a bad value is a one-line :class:`~tracedoc.errors.SettingsError` naming the
variable), and carried on :attr:`Settings.env`; no module below reads them. Two families stay
outside by design: ``TRACEDOC_HOST_*`` (:mod:`tracedoc.hostfacts`: host facts a test injects,
inherited by every child process) and ``TRACEDOC_MEASURE_ONLY`` (the fix-loop's instruction to
the workload process it starts).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracedoc.errors import SettingsError

#: Values a yes/no variable takes (case-insensitive); an empty value is the same as unset.
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Environment:
    """The ``TRACEDOC_*`` environment variables, read once (:meth:`read`) and validated.

    Attributes:
        max_trace_bytes: ``TRACEDOC_MAX_TRACE_BYTES``, the largest trace accepted (JSON bytes
            after decompression; ``16G``-style sizes, :func:`tracedoc.load.source.parse_size`).
        no_config: ``TRACEDOC_NO_CONFIG``: ignore every ``[tool.tracedoc]`` table.
        cache_dir: ``TRACEDOC_CACHE_DIR``, the frame cache folder.
        cache_min_bytes: ``TRACEDOC_CACHE_MIN_BYTES``: traces smaller on disk are not cached.
        cache_max_bytes: ``TRACEDOC_CACHE_MAX_BYTES``: the cache folder is trimmed to this size.
        no_progress: ``TRACEDOC_NO_PROGRESS``: no progress line on stderr.
        debug: ``TRACEDOC_DEBUG``: an internal error ends in its traceback, not one line.
        dask_timeout: ``TRACEDOC_DASK_TIMEOUT``, how long to wait for a Dask scheduler
            (``10s``-style, as Dask takes it; checked here, a positive number with an optional unit).

    None (or False) means unset: each consumer keeps its own default.
    """

    max_trace_bytes: int | None = None
    no_config: bool = False
    cache_dir: str | None = None
    cache_min_bytes: int | None = None
    cache_max_bytes: int | None = None
    no_progress: bool = False
    debug: bool = False
    dask_timeout: str | None = None

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> Environment:
        """The variables of ``environ`` (default ``os.environ``).

        Raises:
            tracedoc.errors.SettingsError: a variable holds a value it does not take (a size
                that is not one, a yes/no variable with another word, a duration that is not
                one); the message names it.
        """
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            value = env.get(f"TRACEDOC_{name}", "").strip()
            return value or None

        return cls(
            max_trace_bytes=_size(get, "MAX_TRACE_BYTES"),
            no_config=_flag(get, "NO_CONFIG"),
            cache_dir=get("CACHE_DIR"),
            cache_min_bytes=_size(get, "CACHE_MIN_BYTES", zero_ok=True),
            cache_max_bytes=_size(get, "CACHE_MAX_BYTES"),
            no_progress=_flag(get, "NO_PROGRESS"),
            debug=_flag(get, "DEBUG"),
            dask_timeout=_duration(get, "DASK_TIMEOUT"),
        )


def _size(get: Any, name: str, zero_ok: bool = False) -> int | None:
    """A size variable in bytes (``4M``, ``16G``; ``0`` only where ``zero_ok``), or None."""
    text = get(name)
    if text is None:
        return None
    if zero_ok and text == "0":
        return 0
    from tracedoc.load.source import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise SettingsError(f"$TRACEDOC_{name}: {exc}") from None


#: A duration as Dask's ``parse_timedelta`` reads it (a number, then an optional unit; seconds
#: by default): the subset of its forms checked here, without importing Dask.
_DURATION = re.compile(
    r"(\d+(?:\.\d*)?|\.\d+) *"  # ASCII spaces only: Dask reads the text as it is
    r"(s|ms|us|ns|m|h|d|w|(?:second|minute|hour|day|week|millisecond|microsecond|nanosecond)s?)?",
    re.IGNORECASE,
)


def _duration(get: Any, name: str) -> str | None:
    """A positive duration variable (``10s``, ``500ms``, ``2 minutes``), kept as its text for
    Dask; None when unset."""
    text = get(name)
    if text is None:
        return None
    m = _DURATION.fullmatch(text)
    if not m or float(m.group(1)) <= 0:
        raise SettingsError(f"$TRACEDOC_{name}: expected a positive duration such as 10s, 500ms or 2m, got {text!r}")
    return text


def _flag(get: Any, name: str) -> bool:
    """A yes/no variable: 1/true/yes/on or 0/false/no/off (any case); unset or empty is no."""
    text = get(name)
    if text is None:
        return False
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise SettingsError(f"$TRACEDOC_{name}: expected 1 or 0 (or true/false, yes/no, on/off), got {text!r}")


@dataclass(frozen=True)
class Settings:
    """The options of one analysis (hashable and picklable: it crosses process boundaries).

    Attributes:
        select, ignore: rule selectors (codes, code prefixes or names); None: every rule / none.
        rule_paths: extra rule files or folders (absolute or relative to the working directory).
        thresholds: ``((rule, ((signal, number), ...)), ...)``, the ``[tool.tracedoc.thresholds]``
            overrides (:func:`tracedoc.config.apply_thresholds`).
        config_path: the pyproject.toml they came from (None: none found, or ignored).
        fail_on: the severity at or above which ``analyze`` exits 1.
        strict: an incomplete analysis (a selected rule skipped) fails.
        min_saving_ms, min_saving_share: the finding floors (None: the engine's defaults,
            :mod:`tracedoc.engine.claims`).
        max_trace_bytes: the largest trace accepted, JSON bytes after decompression (the
            option, else ``$TRACEDOC_MAX_TRACE_BYTES``; None: the loader's default); passed to
            every loader and rank worker as an argument.
        env: the ``TRACEDOC_*`` variables as read when these settings were resolved.
    """

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    rule_paths: tuple[str, ...] = ()
    thresholds: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()
    config_path: str | None = None
    fail_on: str = "info"
    strict: bool = False
    min_saving_ms: float | None = None
    min_saving_share: float | None = None
    max_trace_bytes: int | None = None
    env: Environment = field(default_factory=Environment)

    @classmethod
    def resolve(cls, start: str | Path | None, **options: Any) -> Settings:
        """The settings for a trace at ``start``: ``[tool.tracedoc]`` (``TRACEDOC_NO_CONFIG=1``
        ignores it), with the explicit ``options`` (the keywords of :meth:`from_config`)
        winning: selectors replace the file's; extra rule paths are added to its own.

        Raises:
            tracedoc.config.ConfigError: a malformed ``[tool.tracedoc]`` table.
            tracedoc.errors.SettingsError: a ``TRACEDOC_*`` variable with a bad value.
        """
        from tracedoc.config import Config, load_config

        env = options.pop("env", None) or Environment.read()
        if env.no_config:
            cfg = Config()
        else:
            cfg = load_config(Path(start) if start is not None and str(start) != "-" else None)
        return cls.from_config(cfg, env=env, **options)

    @classmethod
    def from_config(
        cls,
        cfg: Any,
        *,
        select: list[str] | tuple[str, ...] | None = None,
        ignore: list[str] | tuple[str, ...] | None = None,
        rule_paths: list[str | Path] | tuple[str | Path, ...] = (),
        fail_on: str | None = None,
        strict: bool = False,
        min_saving_ms: float | None = None,
        min_saving_share: float | None = None,
        max_trace_bytes: int | None = None,
        env: Environment | None = None,
    ) -> Settings:
        """The settings of an already loaded :class:`tracedoc.config.Config`, with the explicit
        options winning as in :meth:`resolve` (which reads the file and calls this). ``env``:
        the environment (default :meth:`Environment.read`).

        Raises:
            tracedoc.errors.SettingsError: a ``TRACEDOC_*`` variable with a bad value.
        """
        env = env if env is not None else Environment.read()
        sel = select if select is not None else cfg.select
        ign = ignore if ignore is not None else cfg.ignore
        return cls(
            select=tuple(sel) if sel is not None else None,
            ignore=tuple(ign) if ign is not None else None,
            rule_paths=tuple(str(p) for p in (*cfg.rules, *rule_paths)),
            thresholds=tuple((k, tuple(v.items())) for k, v in cfg.thresholds.items()),
            config_path=str(cfg.path) if cfg.path else None,
            fail_on=fail_on or cfg.fail_on or "info",
            strict=strict or cfg.strict,
            min_saving_ms=min_saving_ms,
            min_saving_share=min_saving_share,
            max_trace_bytes=max_trace_bytes if max_trace_bytes is not None else env.max_trace_bytes,
            env=env,
        )

    @property
    def threshold_map(self) -> dict[str, dict[str, float]]:
        """``thresholds`` as ``{rule: {signal: number}}``."""
        return {k: dict(v) for k, v in self.thresholds}

    def rules(self) -> list[Any]:
        """The rules these settings evaluate: the built-in ones and ``rule_paths``, with the
        threshold overrides applied, the selectors checked against them (loaded once per
        distinct settings in a process).

        Raises:
            tracedoc.errors.RuleError: a bad rule file, or a selector that matches no rule.
            tracedoc.config.ConfigError: a threshold override for no rule.
        """
        return list(_rules(self))


@functools.lru_cache(maxsize=8)
def _rules(settings: Settings) -> tuple[Any, ...]:
    from tracedoc.config import apply_thresholds
    from tracedoc.engine.rules import load_rules, select_rules

    rules = load_rules(list(settings.rule_paths))
    if settings.thresholds:
        rules = apply_thresholds(rules, settings.threshold_map, settings.config_path)
    # the selectors checked by the engine's own check (a RuleError naming the one that matches nothing)
    select_rules(rules, list(settings.select or ()), list(settings.ignore or ()))
    return tuple(rules)
