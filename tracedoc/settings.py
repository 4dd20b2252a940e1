"""Every analysis option in one picklable object, resolved once.

:meth:`Settings.resolve` reads ``[tool.tracedoc]`` the way the CLI always has (the closest
``pyproject.toml`` with that table, upward from the trace's folder, then upward from the
working directory: :func:`tracedoc.config.find_config`) and lets explicit options win. The
result goes to every entry point (the CLI, :func:`tracedoc.analyze`, rank jobs, fix-loop
trials, ``tracedoc diff``) through :func:`tracedoc.pipeline.analyze`, so one project gets one
set of findings whichever road it takes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
        max_trace_bytes: the largest trace accepted, JSON bytes after decompression (None:
            ``$TRACEDOC_MAX_TRACE_BYTES`` or the loader's default); passed to every loader and
            rank worker as an argument.
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

    @classmethod
    def resolve(cls, start: str | Path | None, **options: Any) -> Settings:
        """The settings for a trace at ``start``: ``[tool.tracedoc]`` (``TRACEDOC_NO_CONFIG=1``
        ignores it), with the explicit ``options`` (the keywords of :meth:`from_config`)
        winning: selectors replace the file's; extra rule paths are added to its own.

        Raises:
            tracedoc.config.ConfigError: a malformed ``[tool.tracedoc]`` table.
        """
        from tracedoc.config import load_config

        return cls.from_config(load_config(Path(start) if start is not None and str(start) != "-" else None), **options)

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
    ) -> Settings:
        """The settings of an already loaded :class:`tracedoc.config.Config`, with the explicit
        options winning as in :meth:`resolve` (which reads the file and calls this)."""
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
            max_trace_bytes=max_trace_bytes,
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
