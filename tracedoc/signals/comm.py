"""Communication classification: which kernels and CPU spans are collective communication.

Name patterns are data (``patterns.toml``, tables ``communication_kernels`` and
``communication_ops``, each family with its source). Used by the step-time breakdown,
the idle ledger, ``exposed-communication`` and the cross-rank collective comparison.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracedoc.signals.attribution import compiled
from tracedoc.signals.strings import name_mask


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
