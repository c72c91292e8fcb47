#pragma once

#include "dataset.h"
#include "net.h"
#include "options.h"

struct EvalMetrics {
  double loss = 0;
  double accuracy = 0;
};

// Trains `model` in place on `data` for opts.epochs epochs with SGD.
void train(Net& model, DataSet& data, const Options& opts);

EvalMetrics evaluate(Net& model, DataSet& data, const Options& opts);
