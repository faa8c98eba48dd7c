"""Screenshot the Key_Shared page of a running `pulsar-lens demo` (the README's image).

    .venv/bin/python scripts/screenshot_demo.py [--out docs/images/key-shared.png] [--warmup 75]

Starts `pulsar-lens demo` on a free port, lets the workloads run `warmup` seconds (so a hash
is stuck and a bundle has moved), captures the page in headless Chromium (Debian's
/usr/bin/chromium; nothing is downloaded), then stops the demo with Ctrl-C.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from pulsar_lens.lab.localpulsar import free_port

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def wait_for_line(proc: subprocess.Popen[str], prefix: str, timeout: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line.split(": ", 1)[1].strip()
    raise SystemExit(f"the demo never printed {prefix!r}")


def capture(url: str, out: Path) -> None:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1360, "height": 1000})
        page.goto(f"{url}/key-shared", timeout=60_000)
        page.locator(".vega-embed canvas, .vega-embed svg").first.wait_for(timeout=60_000)
        page.wait_for_timeout(2000)
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out))
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/images/key-shared.png"))
    parser.add_argument("--warmup", type=float, default=75.0)
    args = parser.parse_args()
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "pulsar_lens.cli.main",
        "demo",
        "--port",
        str(port),
        "--interval",
        "3s",
    ]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        try:
            url = wait_for_line(proc, "Pulsar Lens dashboard:", timeout=240)
            time.sleep(args.warmup)
            capture(url, args.out)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)
    print(f"{args.out}: {args.out.stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
