"""The frame schema (column names and dtypes), kept free of pandas so the loader's
decoding stage can run before pandas is imported. Documented in :mod:`tracedoc.trace`."""

from __future__ import annotations

FRAME_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "ops": [("name", "object"), ("cat", "object"), ("pid", "object"), ("tid", "object"),
            ("ts_us", "float64"), ("dur_us", "float64"), ("end_us", "float64"),
            ("external_id", "float64")],
    "runtime": [("name", "object"), ("cat", "object"), ("kind", "object"), ("pid", "object"),
                ("tid", "object"), ("ts_us", "float64"), ("dur_us", "float64"),
                ("end_us", "float64"), ("correlation", "float64")],
    "kernels": [("name", "object"), ("device", "int64"), ("stream", "int64"), ("ts_us", "float64"),
                ("dur_us", "float64"), ("end_us", "float64"), ("correlation", "float64"),
                ("blocks_per_sm", "float64"), ("warps_per_sm", "float64"),
                ("occupancy_pct", "float64")],
    "memcpys": [("name", "object"), ("copy_kind", "object"), ("src_memory", "object"),
                ("dst_memory", "object"), ("device", "int64"), ("stream", "int64"),
                ("ts_us", "float64"), ("dur_us", "float64"), ("end_us", "float64"),
                ("bytes", "float64"), ("correlation", "float64")],
    "memsets": [("name", "object"), ("device", "int64"), ("stream", "int64"), ("ts_us", "float64"),
                ("dur_us", "float64"), ("end_us", "float64"), ("bytes", "float64"),
                ("correlation", "float64")],
    "syncs": [("name", "object"), ("device", "int64"), ("stream", "int64"), ("ts_us", "float64"),
              ("dur_us", "float64"), ("end_us", "float64"), ("correlation", "float64")],
    "memory": [("ts_us", "float64"), ("device_type", "int64"), ("device_id", "int64"),
               ("bytes", "float64"), ("total_allocated_bytes", "float64"),
               ("total_reserved_bytes", "float64")],
    "steps": [("step", "int64"), ("name", "object"), ("ts_us", "float64"), ("dur_us", "float64"),
              ("end_us", "float64")],
}
