#!/usr/bin/env python3
"""Reads a TensorBoard log folder with TensorBoard's own reader (its event
accumulator, the code behind TensorBoard's scalar dashboard) and prints
every scalar as JSON: {"tag": [[step, value], ...], ...}.

  <python with the tensorboard package> tensorboard_reader.py FOLDER

Run by test/runtime/launch_driver.py (case loggers) with the Python of the
LibTorch 2.x virtual environment (scripts/libtorch2.sh --tensorboard), so
the runtime's event files are read by TensorBoard, not only by the
project's own decoder. Exit 2 when the package is missing.
"""
import json
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as error:
    print(f"tensorboard_reader.py: the tensorboard package is missing ({error})", file=sys.stderr)
    sys.exit(2)

accumulator = event_accumulator.EventAccumulator(sys.argv[1], size_guidance={event_accumulator.SCALARS: 0})
accumulator.Reload()
scalars = {tag: [[event.step, event.value] for event in accumulator.Scalars(tag)]
           for tag in accumulator.Tags()["scalars"]}
print(json.dumps(scalars, sort_keys=True))
