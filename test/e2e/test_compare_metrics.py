#!/usr/bin/env python3
"""The 2-rank metric comparison of run_e2e.py on recorded outputs: it passes
a healthy 2-rank run that made half the optimizer steps, and fails one whose
metric lost its meaning (a per-rank sum divided by the whole data set)."""
import contextlib
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_e2e  # noqa: E402

failures = []


def verdict(one, one_steps, two, two_steps):
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            worst = run_e2e.compare_metrics("case", one, one_steps, two, two_steps)
        return True, worst, out.getvalue()
    except SystemExit:
        return False, None, out.getvalue()


def expect(label, wanted, *case):
    ok, worst, said = verdict(*case)
    print(f"{label}: {'passes' if ok else 'fails'} (wanted: {'passes' if wanted else 'fails'})"
          + (f", worst {worst:.1%}" if ok else "") + (f"\n  {said.strip()}" if said else ""))
    if ok != wanted:
        failures.append(label)


# Recorded from the corpus transformer LM (epoch averages, 48 vs 24 steps).
ONE = ["epoch 0 loss 3.88402", "epoch 1 loss 2.66902", "epoch 2 loss 1.70707"]
TWO = ["epoch 0 loss 4.15564", "epoch 1 loss 3.50186", "epoch 2 loss 2.89117"]
expect("epoch losses, 2 ranks after half the steps", True, ONE, 48, TWO, 24)
expect("epoch losses halved on 2 ranks", False, ONE, 48, [l.replace(l.split()[-1], str(float(l.split()[-1]) / 2))
                                                          for l in TWO], 24)
expect("the last lines compared as if after as many steps", False, ONE, 24, TWO, 24)

# Recorded from the corpus MNIST CNN (a step counter in the line).
ONE = ["epoch 1 step 10 loss 2.0031", "epoch 1 val_acc 0.992188", "epoch 2 step 20 loss 1.4009",
       "epoch 2 step 30 loss 0.7881", "epoch 2 val_acc 1", "epoch 3 step 40 loss 0.3228", "epoch 3 val_acc 1",
       "epoch 4 step 50 loss 0.1105", "epoch 4 step 60 loss 0.0427", "epoch 4 val_acc 1"]
TWO = ["epoch 1 val_acc 0.738281", "epoch 2 step 10 loss 1.9483", "epoch 2 val_acc 0.996094",
       "epoch 3 step 20 loss 1.4406", "epoch 3 val_acc 1", "epoch 4 step 30 loss 0.8375", "epoch 4 val_acc 1"]
expect("step-numbered losses and accuracies", True, ONE, 64, TWO, 32)
expect("accuracy over the whole data set's size", False, ONE, 64,
       [l.replace("val_acc 1", "val_acc 0.5") for l in TWO], 32)

if failures:
    print(f"FAILED: {failures}")
    sys.exit(1)
print("compare_metrics: all cases as wanted")
