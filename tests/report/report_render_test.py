#!/usr/bin/env python3
"""The plan report rendered in headless Chromium (Debian's chromium): `emo optimize --report` on
the sample trace, `emo report` of its JSON gives the same page, the page's timeline, frontier and
tables laid out with a size and drawn elements, and a screenshot whose pixels show each chart's
colours. Standard library only.

    report_render_test.py EMO_BIN SOURCE_DIR [--keep-screenshot PNG]"""
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-dev-shm-usage"]

# Injected into a copy of the page: each part's laid-out size and drawn element count, written
# into the DOM that --dump-dom prints.
MEASURE = """<script>
window.addEventListener('load', () => {
  const out = {};
  for (const [name, sel, parts] of [['timeline', '#timeline-gpu0', 'g.op rect, g.critical rect'],
                                    ['packs', '#timeline-gpu0', 'rect.pack'],
                                    ['frontier', '#frontier', 'circle.frontier-point, circle.mark'],
                                    ['summary', '#summary', 'tbody tr'],
                                    ['energy', '#energy-by-class', 'rect.bar']]) {
    const e = document.querySelector(sel);
    const r = e ? e.getBoundingClientRect() : {width: 0, height: 0};
    out[name] = {width: r.width, height: r.height, parts: e ? e.querySelectorAll(parts).length : 0};
  }
  const pre = document.createElement('pre');
  pre.id = 'measured';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)
    if done.returncode != 0:
        fail(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path}: not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (2, 6):
                fail(f"{path}: PNG of depth {depth}, colour type {color} (expected 8-bit RGB/RGBA)")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b, c = prev[x], prev[x - channels] if x >= channels else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, channels)])
        prev = line
    return width, height, rows


def main():
    if len(sys.argv) < 3:
        fail(__doc__)
    emo, source = sys.argv[1], sys.argv[2]
    keep = sys.argv[sys.argv.index("--keep-screenshot") + 1] if "--keep-screenshot" in sys.argv else None
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        fail("chromium not found: `bash scripts/setup.sh` installs Debian's chromium")
    sample = os.path.join(source, "examples", "gpt_train_h200.json.gz")
    work = tempfile.mkdtemp(prefix="emo_report_")
    try:
        page, saved, again = (os.path.join(work, n) for n in ("plan.html", "plan.json", "again.html"))
        run([emo, "optimize", sample, "--device", "h200", "--report", page, "--json", saved])
        run([emo, "report", saved, "-o", again])
        if open(page, "rb").read() != open(again, "rb").read():
            fail("emo report of the saved JSON differs from the page emo optimize --report wrote")
        text = open(page).read()
        if "<script" in text or "http://" in text.replace("http://www.w3.org/2000/svg", "") or "https://" in text:
            fail("the page is not self-contained (a script or a link out)")

        measured_page = os.path.join(work, "measured.html")
        with open(measured_page, "w") as f:
            f.write(text.replace("</body>", MEASURE + "</body>"))
        dom = run([chromium, *CHROMIUM_FLAGS, "--virtual-time-budget=5000", "--dump-dom", "file://" + measured_page]).stdout

        class Pre(html.parser.HTMLParser):
            inside, text = False, ""

            def handle_starttag(self, tag, attrs):
                self.inside = tag == "pre" and ("id", "measured") in attrs

            def handle_data(self, data):
                if self.inside:
                    self.text += data

        parser = Pre()
        parser.feed(dom)
        if not parser.text:
            fail("the measuring script left nothing in the DOM")
        sizes = json.loads(parser.text)
        print("laid out:", json.dumps(sizes))
        minimum = {"timeline": 100, "packs": 1, "frontier": 5, "summary": 4, "energy": 2}
        for part, least in minimum.items():
            got = sizes[part]
            if got["width"] < 50 or got["height"] < 20:
                fail(f"{part}: laid out at {got['width']}x{got['height']} px")
            if got["parts"] < least:
                fail(f"{part}: {got['parts']} drawn elements, expected at least {least}")

        shot = os.path.join(work, "shot.png")
        run([chromium, *CHROMIUM_FLAGS, "--window-size=1200,1500", f"--screenshot={shot}", "file://" + page])
        width, height, rows = png_pixels(shot)
        seen = {}
        for row in rows:
            for px in row:
                seen[px] = seen.get(px, 0) + 1
        colours = {"ops with slack (#6b6b6b)": (0x6b, 0x6b, 0x6b), "critical path (#8b0000)": (0x8b, 0x00, 0x00),
                   "frontier (#2166ac)": (0x21, 0x66, 0xac), "plan marker (#008837)": (0x00, 0x88, 0x37),
                   "energy bars (#d73027)": (0xd7, 0x30, 0x27), "energy bars (#1a9850)": (0x1a, 0x98, 0x50)}
        for name, rgb in colours.items():
            if seen.get(rgb, 0) < 20:
                fail(f"the screenshot has {seen.get(rgb, 0)} pixels of {name}: that chart is not drawn")
        white = seen.get((255, 255, 255), 0) / (width * height)
        print(f"screenshot {width}x{height}: {len(seen)} colours, {100 * white:.0f} % white; every chart colour seen")
        if keep:
            shutil.copy(shot, keep)
            print("kept", keep)
        print("PASS")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
