"""npu-ocr's own steps around the two networks, on synthetic inputs (no models needed):
PaddleOCR's preprocessing, CTC-greedy decoding, the dictionary and the text boxes."""
import os
import sys

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                                "npu-ocr"))
import npu_ocr  # noqa: E402


def test_det_input_is_imagenet_normalised_rgb():
    rgb = np.zeros((4, 6, 3), np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = 255, 128, 0
    x = npu_ocr.det_input(rgb)
    assert x.shape == (1, 3, 4, 6) and x.dtype == np.float32
    expect = [(1.0 - 0.485) / 0.229, (128 / 255 - 0.456) / 0.224, (0.0 - 0.406) / 0.225]
    assert np.allclose(x[0, :, 2, 3], expect, atol=1e-6)


def test_rec_input_keeps_aspect_at_height_48_and_zero_pads():
    line = Image.new("RGB", (100, 20), (255, 255, 255))  # 5:1 -> 240 x 48
    x = npu_ocr.rec_input(line)
    assert x.shape == (1, 3, 48, 320)
    assert np.allclose(x[..., :240], 1.0)  # white: (255/255 - 0.5)/0.5
    assert not x[..., 240:].any()
    black = npu_ocr.rec_input(Image.new("RGB", (1000, 10), (0, 0, 0)))  # too wide: squeezed
    assert np.allclose(black, -1.0)


def test_letterbox_scales_down_only_and_pads_with_the_border_colour():
    page = Image.new("RGB", (640, 320), (200, 210, 220))
    rgb, scale = npu_ocr.letterbox(page)
    assert rgb.shape == (320, 320, 3) and scale == 0.5
    assert (rgb[300, 10] == (200, 210, 220)).all()  # the padding below the scaled page
    small, scale = npu_ocr.letterbox(Image.new("RGB", (100, 50), (9, 9, 9)))
    assert scale == 1.0 and (small[:50, :100] == 9).all()


def test_dictionary_has_blank_first_and_space_last(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("a\nb\nc\n", encoding="utf-8")
    assert npu_ocr.load_keys(keys) == ["<blank>", "a", "b", "c", " "]


def one_hot(indices, classes):
    probs = np.full((len(indices), classes), 0.01, np.float32)
    probs[np.arange(len(indices)), indices] = 0.9
    return probs


def test_ctc_greedy_collapses_repeats_and_drops_blanks():
    chars = ["<blank>", "a", "b", " "]
    assert npu_ocr.ctc_greedy(one_hot([0, 1, 1, 0, 1, 2, 2, 3, 0], 4), chars) == "aab "
    assert npu_ocr.ctc_greedy(one_hot([0, 0, 0], 4), chars) == ""
    assert npu_ocr.ctc_greedy(one_hot([2, 2, 2], 4)[None], chars) == "b"  # 1 x T x C


def test_boxes_are_scored_grown_and_in_reading_order():
    prob = np.zeros((100, 200), np.float32)
    prob[60:70, 10:50] = 0.9    # second row
    prob[20:30, 120:180] = 0.9  # first row, right
    prob[22:32, 10:60] = 0.9    # first row, left (its top is lower, still the same row)
    prob[80:90, 100:140] = 0.35  # above the threshold, but a mean probability below 0.6
    prob[5, 5:9] = 0.9          # one pixel high: too small
    boxes = npu_ocr.find_boxes(prob)
    # A w x h component grows by w*h*1.5 / (2*(w+h)) on every side, outwards to whole pixels:
    assert boxes[0][:4] == (3, 15, 67, 39)     # 50 x 10: 6.25
    assert boxes[1][:4] == (113, 13, 187, 37)  # 60 x 10: 6.43
    assert boxes[2][:4] == (4, 54, 56, 76)     # 40 x 10: 6
    assert len(boxes) == 3 and all(b[4] == pytest.approx(0.9) for b in boxes)


def test_touching_diagonal_pixels_are_one_component():
    mask = np.zeros((5, 5), bool)
    mask[0, 0] = mask[1, 1] = mask[2, 2] = mask[4, 0] = True
    sizes = sorted(len(ys) for ys, _ in npu_ocr.components(mask))
    assert sizes == [1, 3]


def test_host_operators_come_from_the_verbose_summary():
    summary = ("  step 0: NPU, 12 instructions\n  step 1: host ConvTranspose (node up.0)\n"
               "  step 2: NPU, 3 instructions\n  step 3: host Softmax (node attn/softmax)\n")
    assert npu_ocr.host_ops_of(summary) == ["ConvTranspose 'up.0'", "Softmax 'attn/softmax'"]
