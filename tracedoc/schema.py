"""The frame schema (column names and dtypes), kept free of pandas so the loader's
decoding stage can run before pandas is imported. Documented in :mod:`tracedoc.trace`.

A dtype is a numpy or pandas dtype name, or ``"int"``: int32 when every value of the column
fits in it, else int64 (:func:`tracedoc.trace.id_array`; device and stream ids)."""

from __future__ import annotations

FRAME_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "ops": [
        ("name", "category"),
        ("cat", "category"),
        ("pid", "category"),
        ("tid", "category"),
        ("ts_us", "float64"),
        ("dur_us", "float64"),
        ("end_us", "float64"),
        ("external_id", "float64"),
    ],
    "runtime": [
        ("name", "category"),
        ("cat", "category"),
        ("kind", "category"),
        ("pid", "category"),
        ("tid", "category"),
        ("ts_us", "float64"),
        ("dur_us", "float64"),
        ("end_us", "float64"),
        ("correlation", "float64"),
    ],
    "kernels": [
        ("name", "category"),
        ("device", "int"),
        ("stream", "int"),
        ("ts_us", "float64"),
        ("dur_us", "float64"),
        ("end_us", "float64"),
        ("correlation", "float64"),
        ("occupancy_pct", "float64"),
    ],
    "memcpys": [
        ("name", "object"),
        ("copy_kind", "object"),
        ("src_memory", "object"),
        ("dst_memory", "object"),
        ("device", "int"),
        ("stream", "int"),
        ("ts_us", "float64"),
        ("dur_us", "float64"),
        ("end_us", "float64"),
        ("bytes", "float64"),
        ("correlation", "float64"),
    ],
    "memsets": [
        ("name", "object"),
        ("device", "int"),
        ("stream", "int"),
        ("ts_us", "float64"),
        ("dur_us", "float64"),
        ("end_us", "float64"),
        ("bytes", "float64"),
        ("correlation", "float64"),
    ],
    "syncs": [
        ("name", "object"),
        ("device", "int"),
        ("stream", "int"),
        ("ts_us", "float64"),
        ("dur_us", "float64"),
        ("end_us", "float64"),
        ("correlation", "float64"),
        ("wait_event_corr", "float64"),
    ],
    "memory": [
        ("ts_us", "float64"),
        ("device_type", "int"),
        ("device_id", "int"),
        ("bytes", "float64"),
        ("total_allocated_bytes", "float64"),
        ("total_reserved_bytes", "float64"),
    ],
    "steps": [
        ("step", "int64"),
        ("name", "object"),
        ("ts_us", "float64"),
        ("dur_us", "float64"),
        ("end_us", "float64"),
    ],
}
