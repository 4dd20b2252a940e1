"""Name catalogues: the pattern tables of ``patterns.toml`` (each family with its source) and
the classifications that are nothing but a name match (collective communication kernels and
CPU spans). The bottom of the signals package: it imports no other signal module, so every
module can classify names without an import cycle.
"""

from __future__ import annotations

import re
import tomllib
from functools import cache, lru_cache
from importlib import resources

import numpy as np
import pandas as pd

from tracedoc.signals.strings import name_mask


@lru_cache(maxsize=1)
def patterns() -> dict[str, dict[str, list[str]]]:
    """The pattern tables of ``patterns.toml`` (family -> list of regexes)."""
    text = resources.files("tracedoc.signals").joinpath("patterns.toml").read_text()
    return tomllib.loads(text)


@cache
def compiled(table: str) -> re.Pattern[str]:
    """One case-insensitive regex matching any pattern of a table of ``patterns.toml``."""
    pats = [p for fam in patterns()[table].values() for p in fam]
    return re.compile("|".join(f"(?:{p})" for p in pats), re.IGNORECASE)


def comm_kernel_mask(names: pd.Series) -> np.ndarray:
    """Boolean mask over kernel names: NCCL/RCCL, symmetric-memory all-reduce, DeepEP/NVSHMEM.

    Args:
        names: a column of kernel names (``str``), length n.

    Returns:
        ``bool`` array of length n.
    """
    return name_mask(names, compiled("communication_kernels").search)


def comm_op_mask(names: pd.Series) -> np.ndarray:
    """Boolean mask over CPU op/annotation names: ``gloo:*``, ``c10d::*``, ``record_param_comms``, ``nccl:*``.

    Args:
        names: a column of CPU op names (``str``), length n.

    Returns:
        ``bool`` array of length n.
    """
    return name_mask(names, compiled("communication_ops").search)


# ---- signals -------------------------------------------------------------------------
