#!/usr/bin/python3
"""Rendered inputs for the OCR tests and the demo (Pillow and Debian's fonts-dejavu-core).

Every image comes from a seed, so a run renders the same pixels on any machine with the same
Pillow and fonts. The evaluation and calibration sets use disjoint seed ranges, and
eval_and_calib_are_disjoint() checks the pixels too.

  page(seed)     a 320x320 page: lines of words and numbers in several fonts and sizes, dark
                 ink on a light background (det)
  line(seed)     one text line, cropped with a small margin as det boxes are -> (image, text)
  receipt()      the demo's receipt-like page
  dataset(kind, split) -> [(image, text or None)]; kind "det" or "rec", split "eval" or "calib"

render.py OUT_DIR  writes the receipt and the first evaluation pages and lines as PNGs.
"""
import hashlib
import os
import random
import sys

from PIL import Image, ImageDraw, ImageFont

FONT_DIR = "/usr/share/fonts/truetype/dejavu"
FONTS = ["DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf",
         "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf"]
WORDS = ("TOTAL CASH CHANGE ITEM PRICE QTY RECEIPT STORE Apple Milk Bread Coffee Tax Visa "
         "Thank you Order Table Date Time Card Butter Cheese Eggs Rice Tea Juice Water Soap "
         "Subtotal Discount Station Market Street Ticket Invoice Paid Net Weight Serial").split()

# Sizes of the sets; the tests evaluate on every evaluation input.
SETS = {("det", "eval"): 24, ("det", "calib"): 8, ("rec", "eval"): 40, ("rec", "calib"): 16}
SEED_BASE = {"eval": 0, "calib": 100000}


def font(name, size):
    path = os.path.join(FONT_DIR, name)
    if not os.path.isfile(path):
        raise SystemExit(f"{path}: missing; install Debian's fonts-dejavu-core "
                         "(scripts/install-deps)")
    return ImageFont.truetype(path, size)


def token(r):
    """A word, or a number as receipts print them: prices, quantities, dates, codes."""
    kind = r.random()
    if kind < 0.55:
        return r.choice(WORDS)
    if kind < 0.7:
        return f"{r.randint(0, 999)}.{r.randint(0, 99):02d}"
    if kind < 0.8:
        return f"{r.randint(2000, 2030)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"
    if kind < 0.9:
        return f"#{r.randint(100, 99999)}"
    return f"{r.choice('ABCDEFGHKLMNPRSTXZ')}{r.choice('ABCDEFGHKLMNPRSTXZ')}-{r.randint(1, 999)}"


def light(r):
    return tuple(r.randint(215, 255) for _ in range(3))


def ink(r):
    return tuple(r.randint(0, 70) for _ in range(3))


def page(seed, size=320):
    r = random.Random(seed)
    im = Image.new("RGB", (size, size), light(r))
    d = ImageDraw.Draw(im)
    y = r.randint(4, 20)
    while y < size - 28:
        px = r.randint(14, 26)
        f = font(r.choice(FONTS), px)
        text = " ".join(token(r) for _ in range(r.randint(1, 3)))
        d.text((r.randint(4, 40), y), text, fill=ink(r), font=f)
        y += px + r.randint(8, 18)
    return im


def line(seed):
    """-> (image, text): 1-3 tokens, 16-40 px, cropped to the ink with a 2-8 px margin."""
    r = random.Random(seed)
    text = " ".join(token(r) for _ in range(r.randint(1, 3)))
    f = font(r.choice(FONTS), r.randint(16, 40))
    x0, y0, x1, y1 = f.getbbox(text)
    mx, my = r.randint(2, 8), r.randint(2, 8)
    im = Image.new("RGB", (x1 - x0 + 2 * mx, y1 - y0 + 2 * my), light(r))
    ImageDraw.Draw(im).text((mx - x0, my - y0), text, fill=ink(r), font=f)
    return im, text


RECEIPT = ["CORNER MARKET", "2026-12-01 14:32", "Milk 1.29", "Bread 2.49", "Coffee 7.99",
           "Apple 0.85", "TOTAL 12.62", "Visa #4821", "Thank you"]


def receipt(size=320):
    """A receipt-like page: the store, date, items with prices, total, card, thanks."""
    im = Image.new("RGB", (size, size), (246, 244, 238))
    d = ImageDraw.Draw(im)
    y = 10
    for i, text in enumerate(RECEIPT):
        bold = i in (0, 6)
        f = font("DejaVuSans-Bold.ttf" if bold else "DejaVuSansMono.ttf", 20 if bold else 18)
        d.text((24, y), text, fill=(30, 30, 34), font=f)
        y += 33
    return im


def dataset(kind, split):
    n, base = SETS[(kind, split)], SEED_BASE[split]
    if kind == "det":
        return [(page(base + k), None) for k in range(n)]
    return [line(base + k) for k in range(n)]


def digest(im):
    return hashlib.sha256(im.tobytes()).hexdigest()


def eval_and_calib_are_disjoint(kind):
    ev = {digest(im) for im, _ in dataset(kind, "eval")}
    return not ev & {digest(im) for im, _ in dataset(kind, "calib")}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: render.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    receipt().save(os.path.join(out, "receipt.png"))
    for k, (im, _) in enumerate(dataset("det", "eval")[:4]):
        im.save(os.path.join(out, f"page{k}.png"))
    for k, (im, text) in enumerate(dataset("rec", "eval")[:8]):
        im.save(os.path.join(out, f"line{k}.png"))
        print(f"line{k}.png: {text}")
    print(f"wrote {out}")
