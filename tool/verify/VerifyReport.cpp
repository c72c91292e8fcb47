#include "verify/VerifyReport.h"

#include "utilities/HtmlEscape.h"
#include "outputs/Output.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace fabricize {

namespace {

std::string number(double value, const char* format = "%.4g") {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// About `count` round tick values covering [low, high].
std::vector<double> ticks(double low, double high, int count) {
  std::vector<double> out;
  const double span = high - low;
  if (!(span > 0)) return {low};
  const double raw = span / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 5.0, 10.0})
    if (factor * magnitude >= raw) {
      step = factor * magnitude;
      break;
    }
  for (double t = std::ceil(low / step) * step; t <= high + step * 1e-9; t += step) out.push_back(t);
  return out;
}

// The runs' colours: the original black, the 1-process run blue, the ranks
// of the 2-process run orange and green (dashed).
const char* const kOriginal = "#222222";
const char* const kOne = "#1f77b4";
const char* const kRank0 = "#ff7f0e";
const char* const kRank1 = "#2ca02c";

std::string markdown(const std::vector<Check>& checks, const std::string& subject, int verdict,
                     const nlohmann::json& findings, const std::string& migrationReport, const std::string& lossSvg) {
  std::string md = "# fabricize verify: " + subject + "\n\n";
  md += verdict == kEquivalent ? "**Equivalent**: every check passed.\n\n"
                               : "**Differences found** (exit 1): see the failed checks.\n\n";
  md += "![Loss per optimizer step: original, 1 process, each rank of 2](" + lossSvg + ")\n\n";
  md += "| check | verdict |\n|---|---|\n";
  for (const Check& c : checks) md += "| " + c.title + " | " + c.verdict + " |\n";
  for (const Check& c : checks) {
    if (c.details.empty() && c.where.empty()) continue;
    md += "\n## " + c.title + " (" + c.verdict + ")\n\n";
    for (const std::string& d : c.details) md += "- " + d + "\n";
    if (!c.where.empty()) {
      md += "\nMost likely responsible:\n\n";
      for (const std::string& w : c.where) md += "- `" + w + "`\n";
    }
  }
  if (!migrationReport.empty())
    md +=
        "\nThe migration report (per file and rule: migrated automatically, needs a person, not "
        "understood): " +
        migrationReport + "\n";
  if (!findings.empty()) {
    md += "\n## What the migration reported\n\n";
    for (const auto& f : findings)
      md += "- `" + f.value("path", std::string()) + ":" + std::to_string(f.value("line", 0)) + "` [" +
            f.value("rule", std::string()) + "] " + f.value("message", std::string()) + "\n";
  }
  return md;
}

}  // namespace

std::string lineChartSvg(const std::string& title, const std::string& xLabel, const std::vector<ChartSeries>& series,
                         int width, int height) {
  const double left = 64, right = 16, top = 34, bottom = 72;
  const double plotW = width - left - right, plotH = height - top - bottom;
  double xMin = INFINITY, xMax = -INFINITY, yMin = INFINITY, yMax = -INFINITY;
  for (const ChartSeries& s : series)
    for (const auto& [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y)) {
        xMin = std::min(xMin, x), xMax = std::max(xMax, x);
        yMin = std::min(yMin, y), yMax = std::max(yMax, y);
      }
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
                    std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " +
                    std::to_string(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  svg += "<text x=\"" + number(width / 2.0) + "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">" +
         htmlEscaped(title) + "</text>\n";
  if (!std::isfinite(xMin)) {
    svg += "<text x=\"" + number(width / 2.0) + "\" y=\"" + number(height / 2.0) +
           "\" text-anchor=\"middle\" fill=\"#aa0000\">no values were recorded</text>\n</svg>\n";
    return svg;
  }
  if (xMax == xMin) xMin -= 1, xMax += 1;
  if (yMax == yMin) yMin -= std::max(1e-3, std::fabs(yMin) * 0.05), yMax += std::max(1e-3, std::fabs(yMax) * 0.05);
  const double pad = (yMax - yMin) * 0.05;
  yMin -= pad, yMax += pad;
  auto px = [&](double x) { return left + (x - xMin) / (xMax - xMin) * plotW; };
  auto py = [&](double y) { return top + (yMax - y) / (yMax - yMin) * plotH; };

  // Axes and their ticks.
  svg += "<g stroke=\"#888888\" stroke-width=\"1\" fill=\"none\"><rect x=\"" + number(left) + "\" y=\"" + number(top) +
         "\" width=\"" + number(plotW) + "\" height=\"" + number(plotH) + "\"/></g>\n<g fill=\"#444444\">\n";
  for (double t : ticks(yMin, yMax, 5))
    svg += "<line x1=\"" + number(left - 4) + "\" x2=\"" + number(left) + "\" y1=\"" + number(py(t)) + "\" y2=\"" +
           number(py(t)) + "\" stroke=\"#888888\"/><text x=\"" + number(left - 6) + "\" y=\"" + number(py(t) + 4) +
           "\" text-anchor=\"end\">" + number(t) + "</text>\n";
  for (double t : ticks(xMin, xMax, 6))
    svg += "<line x1=\"" + number(px(t)) + "\" x2=\"" + number(px(t)) + "\" y1=\"" + number(top + plotH) + "\" y2=\"" +
           number(top + plotH + 4) + "\" stroke=\"#888888\"/><text x=\"" + number(px(t)) + "\" y=\"" +
           number(top + plotH + 17) + "\" text-anchor=\"middle\">" + number(t) + "</text>\n";
  svg += "<text x=\"" + number(left + plotW / 2) + "\" y=\"" + number(top + plotH + 34) + "\" text-anchor=\"middle\">" +
         htmlEscaped(xLabel) + "</text>\n</g>\n";

  // The series, then the legend under the axis label.
  double legendX = left;
  const double legendY = height - 14;
  for (const ChartSeries& s : series) {
    std::string points;
    size_t count = 0;
    for (const auto& [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y)) {
        points += (count++ ? " " : "") + number(px(x), "%.1f") + "," + number(py(y), "%.1f");
      }
    if (count == 0) continue;
    const std::string dash = s.dashed ? " stroke-dasharray=\"6 3\"" : "";
    if (count == 1) {
      auto [x, y] = s.points.front();
      svg += "<circle class=\"series\" cx=\"" + number(px(x), "%.1f") + "\" cy=\"" + number(py(y), "%.1f") +
             "\" r=\"3\" fill=\"" + s.color + "\"><title>" + htmlEscaped(s.name) + "</title></circle>\n";
    } else {
      svg += "<polyline class=\"series\" fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.6\"" + dash +
             " points=\"" + points + "\"><title>" + htmlEscaped(s.name) + "</title></polyline>\n";
    }
    svg += "<line x1=\"" + number(legendX) + "\" x2=\"" + number(legendX + 22) + "\" y1=\"" + number(legendY - 4) +
           "\" y2=\"" + number(legendY - 4) + "\" stroke=\"" + s.color + "\" stroke-width=\"2\"" + dash +
           "/><text x=\"" + number(legendX + 27) + "\" y=\"" + number(legendY) + "\">" + htmlEscaped(s.name) +
           "</text>\n";
    legendX += 40 + 7.0 * static_cast<double>(s.name.size());
  }
  return svg + "</svg>\n";
}

std::string lossCurvesSvg(const VerifyRuns& runs) {
  auto curve = [](const std::vector<Record>& records, size_t rank) {
    std::vector<std::pair<double, double>> points;
    if (rank < records.size())
      for (size_t i = 0; i < records[rank].losses.size(); ++i)
        points.push_back({static_cast<double>(i + 1), records[rank].losses[i]});
    return points;
  };
  std::vector<ChartSeries> series{{"original", kOriginal, curve(runs.originalRecord, 0), false},
                                  {"1 process", kOne, curve(runs.oneRecord, 0), false}};
  for (size_t rank = 0; rank < runs.twoRecords.size(); ++rank)
    series.push_back(
        {"2 processes: rank " + std::to_string(rank), rank == 0 ? kRank0 : kRank1, curve(runs.twoRecords, rank), true});
  return lineChartSvg("Loss per optimizer step (each rank's own batches)", "optimizer step", series);
}

std::vector<std::string> metricChartsSvg(const VerifyRuns& runs) {
  // word -> run -> values in printed order (lines of the first shape that
  // prints the word: one series per kind of line).
  std::map<std::string, std::string> shapeOfWord;
  std::map<std::string, std::map<int, std::vector<double>>> values;
  const std::string* consoles[] = {&runs.original.out, &runs.one.out, &runs.two.out};
  for (int run = 0; run < 3; ++run)
    for (const std::string& line : lines(*consoles[run]))
      if (line.rfind("[rank ", 0) != 0)  // another rank's relayed line
        for (const Metric& m : metricsOf(line)) {
          const std::string shape = shapeOf(line);
          auto known = shapeOfWord.emplace(m.word, shape).first;
          if (known->second == shape) values[m.word][run].push_back(m.value);
        }
  std::vector<std::string> charts;
  for (const auto& [word, perRun] : values) {
    const char* names[] = {"original", "1 process", "2 processes (rank 0 prints)"};
    const char* colors[] = {kOriginal, kOne, kRank0};
    std::vector<ChartSeries> series;
    for (int run = 0; run < 3; ++run) {
      ChartSeries s{names[run], colors[run], {}, run == 2};
      auto found = perRun.find(run);
      if (found != perRun.end())
        for (size_t i = 0; i < found->second.size(); ++i)
          s.points.push_back({static_cast<double>(i + 1), found->second[i]});
      series.push_back(std::move(s));
    }
    charts.push_back(lineChartSvg("Printed metric: " + word, "printed line (epoch)", series, 720, 300));
  }
  return charts;
}

std::string verifyHtml(const std::vector<Check>& checks, const std::string& subject, bool equivalent,
                       const VerifyRuns& runs, const std::string& lossCurves, const std::string& migrationReport) {
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>fabricize verify: " +
                     htmlEscaped(subject) +
                     "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1000px}"
                     "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
                     "table{border-collapse:collapse}.pass{color:#1a7f37}.fail{color:#b42318;font-weight:bold}"
                     ".notrun{color:#777}code{background:#f4f4f4}</style></head>\n<body>\n<h1>fabricize verify: " +
                     htmlEscaped(subject) + "</h1>\n";
  page += equivalent ? "<p class=\"pass\"><b>Equivalent</b>: every check passed.</p>\n"
                     : "<p class=\"fail\">Differences found (exit 1): see the failed checks.</p>\n";
  page += "<h2>Losses</h2>\n" + lossCurves;
  std::vector<std::string> metrics = metricChartsSvg(runs);
  if (!metrics.empty()) {
    page += "<h2>Printed metrics</h2>\n";
    for (const std::string& chart : metrics) page += chart;
  }
  page += "<h2>Checks</h2>\n<table><tr><th>check</th><th>verdict</th><th>details</th></tr>\n";
  for (const Check& c : checks) {
    const std::string cls = c.verdict == "pass" ? "pass" : c.verdict == "fail" ? "fail" : "notrun";
    page +=
        "<tr><td>" + htmlEscaped(c.title) + "</td><td class=\"" + cls + "\">" + htmlEscaped(c.verdict) + "</td><td>";
    for (const std::string& d : c.details) page += htmlEscaped(d) + "<br>";
    for (const std::string& w : c.where) page += "at <code>" + htmlEscaped(w) + "</code><br>";
    page += "</td></tr>\n";
  }
  page += "</table>\n";
  if (!runs.migrationFindings.empty()) {
    page += "<h2>What the migration reported</h2>\n<ul>\n";
    for (const auto& f : runs.migrationFindings)
      page += "<li><code>" + htmlEscaped(f.value("path", std::string()) + ":" + std::to_string(f.value("line", 0))) +
              "</code> [" + htmlEscaped(f.value("rule", std::string())) + "] " +
              htmlEscaped(f.value("message", std::string())) + "</li>\n";
    page += "</ul>\n";
  }
  if (!migrationReport.empty())
    page += "<p>The migration report (per file and rule): <a href=\"" + htmlEscaped(migrationReport) + "\">" +
            htmlEscaped(migrationReport) + "</a></p>\n";
  return page + "</body></html>\n";
}

int reportVerdict(const VerifyOptions& o, const std::vector<Check>& checks, const VerifyRuns& runs,
                  std::string& error) {
  int verdict = kEquivalent;
  for (const Check& c : checks)
    if (c.verdict == "fail") verdict = kDifferences;
  const std::string subject = o.buildPath.empty() ? joined(o.sources) : o.buildPath;
  llvm::outs() << "fabricize verify: " << subject << " (" << o.steps << " steps; work folder " << o.work << ")\n";
  for (const Check& c : checks) {
    std::string tag = c.verdict == "pass" ? "PASS " : c.verdict == "fail" ? "FAIL " : "NOT RUN ";
    llvm::outs() << "  " << tag << " " << c.title << "\n";
    for (const std::string& d : c.details) llvm::outs() << "        " << d << "\n";
    for (const std::string& w : c.where) llvm::outs() << "        at " << w << "\n";
  }
  llvm::outs() << (verdict == kEquivalent ? "verdict: equivalent\n" : "verdict: differences found\n");

  if (!o.report.empty()) {
    // --report verify.json (or .html, .md): the JSON, and beside it the
    // Markdown summary, the loss curves (.svg) and the page with them all.
    llvm::SmallString<256> stem(o.report);
    llvm::StringRef extension = llvm::sys::path::extension(o.report);
    if (extension == ".json" || extension == ".html" || extension == ".md" || extension == ".svg")
      llvm::sys::path::replace_extension(stem, "");
    const std::string base(stem);
    const std::string jsonPath =
        extension == ".json" || !(extension == ".html" || extension == ".md" || extension == ".svg") ? o.report
                                                                                                     : base + ".json";
    nlohmann::json report = {{"subject", subject},
                             {"steps", o.steps},
                             {"work", o.work},
                             {"verdict", verdict == kEquivalent ? "equivalent" : "differences"},
                             {"checks", nlohmann::json::array()},
                             {"migration_findings", runs.migrationFindings}};
    for (const Check& c : checks)
      report["checks"].push_back(
          {{"id", c.id}, {"title", c.title}, {"verdict", c.verdict}, {"details", c.details}, {"where", c.where}});
    const std::string migrationReport = o.migrated.empty() ? o.work + "/migration.md" : "";
    const std::string svgName = llvm::sys::path::filename(base).str() + ".svg";
    std::string problem = writeFileAtomically(jsonPath, report.dump(2) + "\n");
    if (problem.empty())
      problem = writeFileAtomically(
          base + ".md", markdown(checks, subject, verdict, runs.migrationFindings, migrationReport, svgName));
    const std::string curves = lossCurvesSvg(runs);
    if (problem.empty()) problem = writeFileAtomically(base + ".svg", curves);
    if (problem.empty())
      problem =
          writeFileAtomically(base + ".html", verifyHtml(checks, subject, verdict == kEquivalent, runs, curves,
                                                         migrationReport.empty() ? "" : o.work + "/migration.html"));
    if (!problem.empty()) {
      error = problem;
      return kCannot;
    }
  }
  return verdict;
}

}  // namespace fabricize
