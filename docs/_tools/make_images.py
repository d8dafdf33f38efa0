"""Render the site's raster images from its own SVG logo (run by hand; the PNGs are committed).

    .venv/bin/python docs/_tools/make_images.py

Writes into docs/_static/: ``favicon.ico`` (16, 32 and 48 px, for browsers that ask for
/favicon.ico or cannot show an SVG icon) and ``social-card.png`` (1200 x 630, the Open Graph
preview). Chromium draws them, driven by Playwright (the `browser`
dependency group and Debian's /usr/bin/chromium), so no image library is needed.
"""

from __future__ import annotations

import base64
import struct
from pathlib import Path

STATIC = Path(__file__).resolve().parent.parent / "_static"
CHROMIUM = "/usr/bin/chromium"


def ico(pngs: list[tuple[int, bytes]]) -> bytes:
    """An .ico file holding PNG images (the format every current browser reads)."""
    header = struct.pack("<HHH", 0, 1, len(pngs))
    offset = len(header) + 16 * len(pngs)
    entries, blobs = b"", b""
    for size, data in pngs:
        dim = 0 if size >= 256 else size  # 0 means 256 in an ICONDIRENTRY
        entries += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(data), offset)
        blobs += data
        offset += len(data)
    return header + entries + blobs


def main() -> None:
    from playwright.sync_api import sync_playwright

    logo = (STATIC / "logo.svg").read_text(encoding="utf-8")
    logo_uri = "data:image/svg+xml;base64," + base64.b64encode(logo.encode()).decode()
    icon_page = (
        "<html><body style='margin:0;background:transparent'>"
        f"<img src='{logo_uri}' style='width:100vw;height:100vh;display:block'></body></html>"
    )
    card_page = f"""<html><body style="margin:0;width:1200px;height:630px;background:#fdfcf8;
      font-family:'DejaVu Sans',sans-serif;display:flex;align-items:center;gap:64px;
      box-sizing:border-box;padding:0 96px;border-bottom:24px solid #2f6db5">
      <img src="{logo_uri}" style="width:300px;height:300px">
      <div><div style="font-size:68px;font-weight:bold;color:#1d2a3a;white-space:nowrap">
      JAX Remat Guide</div>
      <div style="font-size:36px;color:#3b4a5c;margin-top:24px;line-height:1.35">
      Gradient checkpointing with jax.checkpoint and Flax: what is saved, what is recomputed,
      <br>measured on every page</div></div></body></html>"""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        pngs = []
        for size in (16, 32, 48):
            page = browser.new_page(viewport={"width": size, "height": size})
            page.set_content(icon_page)
            pngs.append((size, page.screenshot(omit_background=True)))
            page.close()
        (STATIC / "favicon.ico").write_bytes(ico(pngs))
        page = browser.new_page(viewport={"width": 1200, "height": 630})
        page.set_content(card_page)
        (STATIC / "social-card.png").write_bytes(page.screenshot())
        browser.close()
    for name in ("favicon.ico", "social-card.png"):
        print(f"wrote {STATIC / name} ({(STATIC / name).stat().st_size} bytes)")


if __name__ == "__main__":
    main()
