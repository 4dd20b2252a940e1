"""Regenerate docs/report-workers0.png: the HTML report of the README's "A real report" trace,
as headless Chromium draws it.

    python docs/regenerate_report_png.py            # from the repository root
    python docs/regenerate_report_png.py --height 6000 --out /tmp/whole.png   # more of the page

It renders ``fixtures/v100_resnet50_workers0.pt.trace.json.gz`` with ``--format html`` (the
same renderer, through :func:`tracedoc.render.render`), opens the page in headless Chromium
with the network unreachable (the page draws its charts offline) and saves the top of the page
(``--width`` x ``--height`` CSS pixels) as a PNG. Needs the ``html`` extra (plotly) and a
``chromium`` (Debian's ``chromium`` package) on PATH.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = "fixtures/v100_resnet50_workers0.pt.trace.json.gz"
PNG = ROOT / "docs" / "report-workers0.png"


def render_page(trace: str, out: Path) -> None:
    """The HTML report of ``trace`` (a path relative to the repository root, as the page's
    title shows it) written to ``out``."""
    import tracedoc
    from tracedoc.render import render

    out.write_text(render(tracedoc.analyze(trace), "html"), encoding="utf-8")


def screenshot(page: Path, png: Path, width: int, height: int) -> None:
    """``page`` in headless Chromium, offline, its top ``width`` x ``height`` saved to ``png``.

    Raises:
        SystemExit: no chromium on PATH, or it failed (its last lines of stderr).
    """
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("chromium is not on PATH (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                "--proxy-server=socks5://127.0.0.1:9",  # nothing can be fetched: the page is offline
                "--host-resolver-rules=MAP * ~NOTFOUND",
                f"--user-data-dir={profile}",
                "--virtual-time-budget=10000",  # the charts are drawn after plotly.js is unpacked
                f"--window-size={width},{height}",
                f"--screenshot={png}",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    if r.returncode != 0 or not png.is_file():
        raise SystemExit(f"chromium failed ({r.returncode}): {r.stderr[-1500:]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=TRACE, help="the trace, relative to the repository root")
    ap.add_argument("--out", type=Path, default=PNG, help="the PNG to write")
    ap.add_argument("--width", type=int, default=1100)
    ap.add_argument("--height", type=int, default=1500)
    args = ap.parse_args(argv)
    out = args.out.resolve()  # before the chdir: relative to where the script was started
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        os.chdir(ROOT)  # the title shows the trace as the README runs it
        render_page(args.trace, page)
        screenshot(page, out, args.width, args.height)
    print(f"wrote {out} ({out.stat().st_size:,} bytes) from {args.trace}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
