// fabricize verify, its verdict as people read it: printed, and written as
// JSON, a Markdown summary, the runs' losses per optimizer step and their
// printed metrics drawn as SVG (no script, no network), and an HTML page
// with the pictures beside the checks' verdicts. Part of the verify front
// end (VerifyCommand.cpp).
#pragma once

#include "verify/VerifyChecks.h"

#include <string>
#include <vector>

namespace fabricize {

// One line of a chart: (x, y) points, a colour, dashed or not.
struct ChartSeries {
  std::string name, color;
  std::vector<std::pair<double, double>> points;
  bool dashed = false;
};

// A line chart as a standalone SVG document: axes with ticks, one polyline
// per series with two or more points (a single point is a dot), a legend.
// Non-finite points are left out. With no point at all it says so.
std::string lineChartSvg(const std::string& title, const std::string& xLabel, const std::vector<ChartSeries>& series,
                         int width = 720, int height = 340);

// The loss curves: the original, the migration on 1 process, and each rank
// of the 2-process run, per optimizer step, on the same axes.
std::string lossCurvesSvg(const VerifyRuns& runs);

// One chart per metric the programs print (`val_loss 0.31`, `acc: 0.9`):
// its value on each printed line of the same shape, for the three runs.
std::vector<std::string> metricChartsSvg(const VerifyRuns& runs);

// Prints the checks and writes --report: the JSON, and beside it the
// Markdown summary, the loss curves (.svg) and the HTML page.
// Returns kEquivalent or kDifferences; kCannot with `error` when the report
// cannot be written.
int reportVerdict(const VerifyOptions& options, const std::vector<Check>& checks, const VerifyRuns& runs,
                  std::string& error);

// The whole report as one HTML page (inline SVG, no script).
// `lossCurves`: lossCurvesSvg(runs), drawn once for the page and the .svg.
std::string verifyHtml(const std::vector<Check>& checks, const std::string& subject, bool equivalent,
                       const VerifyRuns& runs, const std::string& lossCurves, const std::string& migrationReport);

}  // namespace fabricize
