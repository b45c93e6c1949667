"""A headless Chromium screenshot of a page opened from the file system (the tests and the README's pictures).

    python -m properties.report.screenshot PAGE.html OUT.png [--width 1280] [--height 2400]
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common.args import OneLineParser
from properties.tools.gate import CHROMIUM_NOT_RUN as NOT_RUN  # a skip's reason the gate accepts as named

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 120


def browser():
    """The path of a Chromium on PATH, or None."""
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def capture(html, png, width=1280, height=2400):
    """Screenshot of ``html`` (a file) at ``width`` x ``height`` CSS pixels into ``png``; RuntimeError (one
    line) when Chromium is absent or writes nothing."""
    exe = browser()
    if exe is None:
        raise RuntimeError(f"{NOT_RUN}: none of {', '.join(BROWSERS)} on PATH")
    png = Path(png).resolve()
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="report-chromium-") as profile:
        subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={profile}", f"--window-size={width},{height}",
                        f"--screenshot={png}", Path(html).resolve().as_uri()],
                       capture_output=True, timeout=TIMEOUT_S, check=False)
    if not png.is_file() or png.stat().st_size == 0:
        raise RuntimeError(f"{exe} wrote no screenshot of {html}")
    return png


def main(argv=None):
    parser = OneLineParser(prog="screenshot", description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2400)
    args = parser.parse_args(argv)
    if not args.page.is_file():
        parser.error(f"{args.page}: no such file")
    try:
        print(capture(args.page, args.out, args.width, args.height))
    except RuntimeError as exc:
        print(f"screenshot: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
