#include "verify/VerifyChecks.h"

#include "outputs/Output.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>

namespace fabricize {

namespace {
const std::string kNumber = R"([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)";
}  // namespace

std::string shapeOf(const std::string& line) {
  static const std::regex number(kNumber);
  return std::regex_replace(line, number, "#");
}

std::vector<Metric> metricsOf(const std::string& line) {
  static const std::regex metric(R"(\b([A-Za-z_]*(?:loss|acc)[A-Za-z_]*)\s*[:=]?\s*()" + kNumber + ")",
                                 std::regex::icase);
  std::vector<Metric> out;
  for (std::sregex_iterator it(line.begin(), line.end(), metric), end; it != end; ++it)
    out.push_back({(*it)[1].str(), std::strtod((*it)[2].str().c_str(), nullptr)});
  return out;
}

namespace {

// A console line with a metric, placed by the optimizer steps made before
// it was printed (the step records note the console's size).
struct Printed {
  std::string shape, line;
  size_t index = 0;  // among the lines of its shape: the epoch, for epoch lines
  double steps = 0;
  std::vector<Metric> metrics;
};

std::map<std::string, std::vector<Printed>> printedMetrics(const std::string& console,
                                                           const std::vector<long long>& offsets) {
  std::map<std::string, std::vector<Printed>> out;
  size_t at = 0;
  for (const std::string& line : lines(console)) {
    const long long begin = static_cast<long long>(at);
    at += line.size() + 1;
    auto metrics = metricsOf(line);
    if (metrics.empty()) continue;
    Printed p;
    p.shape = shapeOf(line);
    p.line = line;
    p.metrics = std::move(metrics);
    // The steps made before the line was complete: `cout << "loss " << train_epoch()`
    // writes its start before the epoch's steps run.
    const long long end = begin + static_cast<long long>(line.size());
    p.steps = static_cast<double>(std::upper_bound(offsets.begin(), offsets.end(), end) - offsets.begin());
    auto& group = out[p.shape];
    p.index = group.size();
    group.push_back(std::move(p));
  }
  return out;
}

// The original's values a 2-rank line may be compared with: the line of the
// same shape and index (same epoch: the same data seen) and the value
// interpolated at as many optimizer steps (the same number of updates), when
// the original printed that far. 2 ranks make half the steps per epoch, so a
// correct migration lands between the two, and a metric that lost its
// meaning (off by the number of ranks) lands outside both. Both are needed:
// either alone is biased while the metric still moves fast (an epoch's mean
// over half the steps), so a line without both is not compared.
std::vector<double> referencesFor(const Printed& p, size_t metric, const std::vector<Printed>& original) {
  std::vector<double> refs;
  if (p.index >= original.size() || original[p.index].metrics.size() <= metric) return refs;
  refs.push_back(original[p.index].metrics[metric].value);
  std::vector<std::pair<double, double>> curve;
  for (const Printed& o : original)
    if (o.metrics.size() > metric) curve.push_back({o.steps, o.metrics[metric].value});
  for (size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].first == p.steps) {
      refs.push_back(curve[i].second);
    } else if (i > 0 && curve[i - 1].first < p.steps && p.steps < curve[i].first) {
      auto [t0, v0] = curve[i - 1];
      auto [t1, v1] = curve[i];
      refs.push_back(v0 + (v1 - v0) * (p.steps - t0) / (t1 - t0));
    }
  }
  if (refs.size() < 2) refs.clear();
  return refs;
}

struct SourceLine {
  std::string file;  // relative to the migrated tree
  unsigned line;
  std::string text;
};

std::vector<SourceLine> sourceLines(const std::string& tree) {
  std::vector<SourceLine> out;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(tree, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef path = it->path();
    // Build folders inside the tree hold generated code, not the program's.
    llvm::StringRef relative = path.substr(tree.size() + 1);
    if (relative.starts_with("build") || relative.contains("/build") || relative.contains("CMakeFiles")) {
      if (it->type() == llvm::sys::fs::file_type::directory_file) it.no_push();
      continue;
    }
    llvm::StringRef ext = llvm::sys::path::extension(path);
    if (ext != ".cpp" && ext != ".cc" && ext != ".cxx" && ext != ".h" && ext != ".hpp") continue;
    auto text = lines(contentsOf(path.str()));
    for (size_t i = 0; i < text.size(); ++i) out.push_back({relative.str(), static_cast<unsigned>(i + 1), text[i]});
  }
  return out;
}

// Lines of the migrated sources matching `pattern` (at most 3), as
// "file:line: text".
std::vector<std::string> linesMatching(const std::vector<SourceLine>& source, const std::regex& pattern) {
  std::vector<std::string> out;
  for (const SourceLine& s : source) {
    if (out.size() == 3) break;
    if (std::regex_search(s.text, pattern)) {
      std::string text =
          s.text.substr(s.text.find_first_not_of(" \t") == std::string::npos ? 0 : s.text.find_first_not_of(" \t"));
      out.push_back(s.file + ":" + std::to_string(s.line) + ": " + text);
    }
  }
  return out;
}

std::string escapeRegex(const std::string& text) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(text, special, R"(\$&)");
}

// The files each rank opened for writing, from libfabric_verify_files.so's log.
std::map<std::string, std::set<int>> writersByFile(const std::string& log, const std::vector<Record>& records,
                                                   const std::string& ignoredFolder) {
  std::map<long, int> rankOfPid;
  for (const Record& r : records)
    if (r.present) rankOfPid[r.pid] = r.rank;
  std::map<std::string, std::set<int>> out;
  for (const std::string& line : lines(contentsOf(log))) {
    size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    std::string path = line.substr(tab + 1);
    if (llvm::StringRef(path).starts_with(ignoredFolder) || llvm::StringRef(path).starts_with("/dev/") ||
        llvm::StringRef(path).starts_with("/proc/") || llvm::StringRef(path).starts_with("/sys/"))
      continue;
    // The writer and its ancestors: a command a rank started (popen,
    // system) writes for that rank, the nearest one in the chain (rank 0
    // starts the others, so it is an ancestor of theirs too).
    llvm::SmallVector<llvm::StringRef, 8> pids;
    llvm::StringRef(line).substr(0, tab).split(pids, ',');
    for (llvm::StringRef pid : pids) {
      auto rank = rankOfPid.find(std::atol(pid.str().c_str()));
      if (rank == rankOfPid.end()) continue;
      out[path].insert(rank->second);
      break;
    }
  }
  return out;
}

std::string ranksText(const std::set<int>& ranks) {
  std::vector<std::string> names;
  for (int r : ranks) names.push_back(std::to_string(r));
  return joined(names);
}

}  // namespace

std::vector<Check> checkRuns(const VerifyOptions& o, const VerifyRuns& runs, const std::string& migratedTree) {
  const nlohmann::json& migrationFindings = runs.migrationFindings;
  const Run &original = runs.original, &one = runs.one, &two = runs.two;
  const std::vector<Record>&oneRecord = runs.oneRecord, &twoRecords = runs.twoRecords;
  const std::string& records = runs.recordsFolder;
  auto findingsOf = [&](const std::string& rule) {
    std::vector<std::string> out;
    for (const auto& f : migrationFindings)
      if (f.value("rule", std::string()) == rule)
        out.push_back(f.value("path", std::string()) + ":" + std::to_string(f.value("line", 0)) + ": [" + rule + "] " +
                      f.value("message", std::string()).substr(0, 160));
    return out;
  };
  const std::vector<SourceLine> migratedSource = sourceLines(migratedTree);
  const Record& reference = runs.originalRecord[0];
  std::vector<Check> checks;

  // 3a. One process: the runtime is transparent.
  {
    Check c{"one-rank-records", "1 rank: losses and parameters identical to the original, bit for bit"};
    const Record& r = oneRecord[0];
    if (one.exitCode != 0 || one.timedOut) {
      c.verdict = "fail";
      c.details.push_back("the migrated program on 1 process " + runStory(one, oneRecord) + ":\n" + tail(one.err, 15));
    } else if (!r.present) {
      c.verdict = "fail";
      c.details.push_back(
          "the migrated program recorded nothing: it never constructed a fabric::Fabric, or "
          "never called fabric.backward()/fabric.step()");
    } else {
      for (size_t i = 0; i < std::max(r.losses.size(), reference.losses.size()); ++i) {
        if (i >= r.losses.size() || i >= reference.losses.size() || r.lossText[i] != reference.lossText[i]) {
          c.verdict = "fail";
          c.details.push_back(
              i >= r.losses.size() || i >= reference.losses.size()
                  ? "the original made " + std::to_string(reference.losses.size()) +
                        " backward passes, the migration " + std::to_string(r.losses.size())
                  : "loss of backward " + std::to_string(i + 1) + ": original " + reference.lossText[i] + " (" +
                        std::to_string(reference.losses[i]) + "), migrated " + r.lossText[i] + " (" +
                        std::to_string(r.losses[i]) + ")" +
                        (i == 0 ? ": the first loss already differs, so the two programs did not start from "
                                  "the same weights or data (a random number drawn by one of them?)"
                                : ""));
          break;
        }
      }
      for (size_t i = 0; c.verdict == "pass" && i < std::max(r.steps.size(), reference.steps.size()); ++i) {
        if (i >= r.steps.size() || i >= reference.steps.size() || r.steps[i] != reference.steps[i]) {
          c.verdict = "fail";
          c.details.push_back(i >= r.steps.size() || i >= reference.steps.size()
                                  ? "the original made " + std::to_string(reference.steps.size()) +
                                        " optimizer steps, the migration " + std::to_string(r.steps.size())
                                  : "parameters after step " + std::to_string(i + 1) + " differ (hash " +
                                        reference.steps[i] + " vs " + r.steps[i] + ")");
        }
      }
      if (c.verdict == "pass")
        c.details.push_back(std::to_string(r.losses.size()) + " losses and " + std::to_string(r.steps.size()) +
                            " parameter hashes identical");
    }
    checks.push_back(c);
  }
  {
    Check c{"one-rank-console", "1 rank: console output identical to the original"};
    auto a = lines(original.out), b = lines(one.out);
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      if (i >= a.size() || i >= b.size() || a[i] != b[i]) {
        c.verdict = "fail";
        c.details.push_back("line " + std::to_string(i + 1) + ": original `" + (i < a.size() ? a[i] : "(none)") +
                            "`, migrated `" + (i < b.size() ? b[i] : "(none)") + "`");
        break;
      }
    }
    if (c.verdict == "pass") c.details.push_back(std::to_string(a.size()) + " lines identical");
    checks.push_back(c);
  }
  {
    Check c{"one-rank-files", "1 rank: the same files written as the original"};
    auto a = filesIn(o.work + "/runs/original"), b = filesIn(o.work + "/runs/one");
    if (a != b) {
      c.verdict = "fail";
      c.details.push_back("original wrote [" + joined(a) + "], the migration [" + joined(b) + "]");
    }
    checks.push_back(c);
  }

  // 3b. Two processes: one model, the same training, one writer per file.
  const bool twoRan = two.exitCode == 0 && !two.timedOut && twoRecords[0].present && twoRecords[1].present;
  {
    Check c{"two-ranks-run", "2 ranks: the job runs to the step budget on both ranks"};
    if (!twoRan) {
      c.verdict = "fail";
      c.details.push_back("the migrated program on 2 processes " + runStory(two, twoRecords));
      std::string said;
      for (const std::string& line : lines(two.err))
        if (llvm::StringRef(line).starts_with("fabric")) said += line + "\n";
      if (!said.empty())
        c.details.push_back("the runtime said:\n" + tail(said, 8));
      else
        c.details.push_back("its last output:\n" + tail(two.err, 10));
      c.where = findingsOf("fabric-divergent-exit");
    } else if (!twoRecords[0].strategy.empty()) {
      c.details.push_back("strategy '" + twoRecords[0].strategy + "' (LT_STRATEGY chooses another)");
    }
    checks.push_back(c);
  }
  {
    Check c{"two-ranks-parameters", "2 ranks: identical parameters on every rank after every step"};
    const Record &r0 = twoRecords[0], &r1 = twoRecords[1];
    size_t common = std::min(r0.steps.size(), r1.steps.size());
    for (size_t i = 0; i < common; ++i)
      if (r0.steps[i] != r1.steps[i]) {
        c.verdict = "fail";
        c.details.push_back("after step " + std::to_string(i + 1) +
                            " rank 0 and rank 1 hold different parameters: "
                            "the ranks train separate copies (gradients not all-reduced)");
        break;
      }
    std::string sync;
    for (const std::string& line : lines(two.err))
      if (line.find("sync check FAILED") != std::string::npos ||
          line.find("differs between ranks") != std::string::npos || line.find("fabric: warning") != std::string::npos)
        sync += line + "\n";
    if (c.verdict == "fail" || !sync.empty()) {
      if (!sync.empty()) c.details.push_back("the runtime said:\n" + tail(sync, 6));
      if (c.verdict == "pass" &&
          (sync.find("FAILED") != std::string::npos || sync.find("differs between ranks") != std::string::npos))
        c.verdict = "fail";
      c.where = linesMatching(migratedSource, std::regex(R"(\.setup\s*\()"));
      if (c.where.empty()) c.where.push_back("no fabric.setup(...) call in the migrated sources");
    }
    if (common == 0 && c.verdict == "pass") {
      c.verdict = "not run";
      c.details.push_back("no step was recorded on both ranks");
    }
    checks.push_back(c);
  }
  {
    Check c{"two-ranks-loss", "2 ranks: loss trajectory within the tolerance band of the original's"};
    const Record &r0 = twoRecords[0], &r1 = twoRecords[1];
    size_t n = std::min({r0.losses.size(), r1.losses.size(), reference.losses.size()});
    if (n == 0) {
      c.verdict = "not run";
      c.details.push_back("no loss recorded on both ranks and in the original");
    } else {
      // Windows of a fifth of the run: single steps are noisy (each rank sees
      // its own shard; the global batch is twice the original's).
      size_t window = std::max<size_t>(1, n / 5);
      double worst = 0;
      for (size_t begin = 0; begin + window <= n; begin += window) {
        double a = 0, b = 0;
        for (size_t i = begin; i < begin + window; ++i) {
          a += reference.losses[i];
          b += (r0.losses[i] + r1.losses[i]) / 2;
        }
        a /= window;
        b /= window;
        double off = std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-12});
        worst = std::max(worst, off);
        if (std::abs(a - b) > o.lossTolerance * std::max(std::abs(a), std::abs(b)) + 0.02 && c.verdict == "pass") {
          c.verdict = "fail";
          c.details.push_back("backward " + std::to_string(begin + 1) + "-" + std::to_string(begin + window) +
                              ": mean loss " + std::to_string(b) + " on 2 ranks, " + std::to_string(a) +
                              " in the original (band " + std::to_string(o.lossTolerance) + ")");
        }
      }
      c.details.push_back("largest relative difference of windowed mean losses: " + std::to_string(worst) + " over " +
                          std::to_string(n) + " backward passes");
    }
    checks.push_back(c);
  }
  {
    Check c{"two-ranks-metrics", "2 ranks: metrics printed by rank 0 equal the 1-rank run's"};
    // The 1-rank run printed what the original printed (checked above):
    // rank 0's lines are compared with the original's.
    auto originalLines = printedMetrics(original.out, reference.offsets);
    auto twoLines = printedMetrics(two.out, twoRecords[0].offsets);
    size_t compared = 0;
    for (const auto& [shape, printed] : twoLines) {
      auto other = originalLines.find(shape);
      if (other == originalLines.end()) continue;
      for (const Printed& p : printed) {
        for (size_t i = 0; i < p.metrics.size(); ++i) {
          std::vector<double> refs = referencesFor(p, i, other->second);
          if (refs.empty()) continue;
          ++compared;
          const double lo = *std::min_element(refs.begin(), refs.end());
          const double hi = *std::max_element(refs.begin(), refs.end());
          const double value = p.metrics[i].value;
          const bool accuracy = llvm::StringRef(p.metrics[i].word).contains_insensitive("acc");
          const double tolerance = accuracy ? std::max(o.accuracyTolerance, 0.1 * std::abs(hi))
                                            : o.metricTolerance * std::max(std::abs(lo), std::abs(hi)) + 0.02;
          if (value >= lo - tolerance && value <= hi + tolerance) continue;
          if (c.verdict == "fail") continue;  // the first difference is the story
          c.verdict = "fail";
          c.details.push_back("rank 0 prints " + p.metrics[i].word + " " + std::to_string(value) + " in `" + p.line +
                              "` (after " + std::to_string(static_cast<long>(p.steps)) +
                              " steps); the original printed " + std::to_string(lo) +
                              (hi != lo ? " to " + std::to_string(hi) : std::string()) +
                              " for the same epoch or after as many steps (tolerance " + std::to_string(tolerance) +
                              "): a metric summed on each rank's shard but divided "
                              "by the whole data set, or not reduced across ranks?");
          c.where = linesMatching(migratedSource, std::regex("\"[^\"]*" + escapeRegex(p.metrics[i].word)));
          auto reported = findingsOf("fabric-per-rank-metric");
          c.where.insert(c.where.end(), reported.begin(), reported.end());
        }
      }
    }
    if (compared == 0 && c.verdict == "pass") {
      c.verdict = "not run";
      c.details.push_back("no loss or accuracy line printed by both runs within " + std::to_string(o.steps) +
                          " steps: raise --steps to reach one");
    } else if (c.verdict == "pass") {
      c.details.push_back(std::to_string(compared) + " metrics compared");
    }
    checks.push_back(c);
  }
  {
    // Issue 37: distributed, not only in sync. Each rank must have trained
    // on its share: the runtime records what it handed each rank (a
    // shard_range, shard_elements, fabric::shard, a Fabric loader's epoch),
    // and ranks that computed bit-identical losses trained on the same
    // batches, whatever the program read them with.
    Check c{"two-ranks-data", "2 ranks: each rank trains on its share of the data, not all of it"};
    const Record &r0 = twoRecords[0], &r1 = twoRecords[1];
    size_t n = std::min(r0.losses.size(), r1.losses.size()), same = 0;
    std::set<std::string> distinct;
    for (size_t i = 0; i < n; ++i)
      if (r0.lossText[i] == r1.lossText[i]) {
        ++same;
        distinct.insert(r0.lossText[i]);
      }
    // Per site: this rank's count against the pass's total, on each rank.
    std::map<std::string, std::vector<std::pair<long long, long long>>> shares;  // site -> (total, mine) per rank
    for (const Record* r : {&r0, &r1}) {
      std::map<std::string, std::pair<long long, long long>> last;
      for (const Record::Share& s : r->shares) last[s.site] = {s.total, s.mine};
      for (const auto& [site, counts] : last) shares[site].push_back(counts);
    }
    for (const auto& [site, counts] : shares) {
      if (counts.size() != 2) continue;
      const long long total = counts[0].first, mine0 = counts[0].second, mine1 = counts[1].second;
      const bool split = total > 0 && mine0 + mine1 == total && mine0 <= total / 2 + 1 && mine1 <= total / 2 + 1;
      c.details.push_back(site + ": rank 0 " + std::to_string(mine0) + " and rank 1 " + std::to_string(mine1) + " of " +
                          std::to_string(total) + " per pass (the original: all " + std::to_string(total) + ")");
      if (!split && total > 1 && c.verdict == "pass") {
        c.verdict = "fail";
        c.details.push_back(site + " did not split its pass between the ranks");
      }
    }
    // A loss that never changes (constant, 0) proves nothing.
    const bool duplicated = n >= 3 && same * 2 > n && distinct.size() >= 2;
    auto unsharded = [&]() {
      std::vector<std::string> out;
      for (const auto& loop : runs.migrationDataLoops) {
        std::string status = loop.value("status", std::string());
        if (status == "needs_a_person" || status == "not_a_data_loop")
          out.push_back(loop.value("file", std::string()) + ":" + std::to_string(loop.value("line", 0)) + ": " +
                        loop.value("text", std::string()));
      }
      if (out.empty())
        for (const auto& loop : runs.migrationDataLoops)
          out.push_back(loop.value("file", std::string()) + ":" + std::to_string(loop.value("line", 0)) + ": " +
                        loop.value("status", std::string()) + ", " + loop.value("text", std::string()));
      return out;
    };
    if (!twoRan || n == 0) {
      c.verdict = "not run";
      c.details.push_back("no backward pass recorded on both ranks");
    } else if (duplicated) {
      c.verdict = "fail";
      c.details.push_back("rank 0 and rank 1 computed bit-identical losses at " + std::to_string(same) + " of " +
                          std::to_string(n) +
                          " backward passes: every rank trains on all of the data (in sync, N times the work "
                          "for one rank's progress)");
      c.where = unsharded();
    } else if (c.verdict == "pass") {
      c.details.push_back("the ranks' losses differ at " + std::to_string(n - same) + " of " + std::to_string(n) +
                          " backward passes: each trains on batches of its own" +
                          (shares.empty() ? " (drawn per rank, or from data the runtime does not count)" : ""));
    }
    checks.push_back(c);
  }
  {
    Check c{"two-ranks-files", "2 ranks: each file written by one rank"};
    auto writers = writersByFile(records + "/two/files.log", twoRecords, records);
    for (const auto& [path, ranks] : writers) {
      if (ranks.size() < 2) continue;
      c.verdict = "fail";
      std::string name = llvm::sys::path::filename(path).str();
      c.details.push_back(path + " is written by ranks " + ranksText(ranks) +
                          ": every rank overwrites it (write it on rank 0: fabric.is_global_zero(), "
                          "fabric.save, or a Fabric logger)");
      auto found = linesMatching(migratedSource, std::regex("\"[^\"]*" + escapeRegex(name)));
      c.where.insert(c.where.end(), found.begin(), found.end());
    }
    if (c.verdict == "pass") c.details.push_back(std::to_string(writers.size()) + " files written, each by one rank");
    checks.push_back(c);
  }

  return checks;
}

}  // namespace fabricize
