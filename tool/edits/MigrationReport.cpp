#include "edits/MigrationReport.h"

#include "utilities/HtmlEscape.h"
#include "utilities/StableOrder.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

namespace fabricize {

namespace {

// The report as blocks, rendered to Markdown or HTML by the same walk.
struct Block {
  enum Kind { Heading, Paragraph, Table, List, Diff } kind;  // Diff: `text` is a unified diff
  int level = 2;
  std::string text;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> items;
};

const char* kindName(ReportEntry::Kind kind) {
  switch (kind) {
    case ReportEntry::Automatic:
      return "migrated automatically";
    case ReportEntry::NeedsPerson:
      return "needs a person";
    case ReportEntry::NotUnderstood:
      return "not understood";
  }
  return "";
}

std::string percent(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f%%", value);
  return text;
}

std::string where(const ReportEntry& e) { return e.file + ":" + std::to_string(e.line); }

const char* statusName(DataLoopEntry::Status status) {
  switch (status) {
    case DataLoopEntry::Sharded:
      return "sharded automatically";
    case DataLoopEntry::PerRank:
      return "drawn per rank";
    case DataLoopEntry::NeedsPerson:
      return "needs a person";
    case DataLoopEntry::NotData:
      return "not a data loop";
  }
  return "";
}

std::string loopCounts(const ReportSummary& s) {
  return std::to_string(s.loops) + (s.loops == 1 ? " training loop" : " training loops") + ": data sharded " +
         std::to_string(s.loopsSharded + s.loopsPerRank) + " (" + std::to_string(s.loopsSharded) + " split, " +
         std::to_string(s.loopsPerRank) + " drawn per rank), needs a person " + std::to_string(s.loopsNeedPerson) +
         ", not a data loop " + std::to_string(s.loopsNotData) + ".";
}

std::vector<Block> build(const MigrationReportData& data) {
  std::vector<Block> doc;
  const ReportSummary summary = summarize(data);
  doc.push_back({Block::Heading, 1, "Migration report: " + data.root});
  doc.push_back({Block::Paragraph, 0,
                 std::to_string(data.files.size()) + " files read. Training constructs found: " +
                     std::to_string(summary.automatic + summary.needsPerson + summary.notUnderstood) + "; " +
                     std::to_string(summary.automatic) + " migrated automatically (" +
                     percent(summary.automaticShare()) + "), " + std::to_string(summary.needsPerson) +
                     " need a person, " + std::to_string(summary.notUnderstood) + " not understood by the tool. " +
                     loopCounts(summary)});

  // What a person must do, first: each finding with its place and the change.
  doc.push_back({Block::Heading, 2, "What needs a person"});
  Block todo{Block::List};
  std::vector<ReportEntry> findings = data.entries;
  stableSort(findings, [](const ReportEntry& a, const ReportEntry& b) {
    return std::tie(a.file, a.line) < std::tie(b.file, b.line);
  });
  for (const ReportEntry& e : findings)
    if (e.kind != ReportEntry::Automatic)
      todo.items.push_back(where(e) + " [" + e.ruleId + "] (" + kindName(e.kind) + "): " + e.text);
  if (todo.items.empty())
    doc.push_back({Block::Paragraph, 0, "Nothing: every training construct found was migrated automatically."});
  else
    doc.push_back(todo);

  // Issue 37: every training loop, and whether each rank trains on its share.
  doc.push_back({Block::Heading, 2, "Data sharded"});
  if (data.dataLoops.empty()) {
    doc.push_back({Block::Paragraph, 0, "No training loop was found."});
  } else {
    doc.push_back({Block::Paragraph, 0,
                   loopCounts(summary) +
                       " A loop whose data is not split trains every rank on all of it: in sync, N times the work."});
    Block loops{Block::Table};
    loops.header = {"training loop", "data sharded", "how"};
    std::vector<DataLoopEntry> sorted = data.dataLoops;
    stableSort(sorted, [](const DataLoopEntry& a, const DataLoopEntry& b) {
      return std::tie(a.file, a.line) < std::tie(b.file, b.line);
    });
    for (const DataLoopEntry& loop : sorted)
      loops.rows.push_back({loop.file + ":" + std::to_string(loop.line), statusName(loop.status), loop.text});
    doc.push_back(loops);
  }

  // Where the Fabric lives: constructed in main, passed to the training code.
  Block fabric{Block::List};
  std::vector<ReportEntry> inOrder = data.entries;
  stableSort(inOrder, [](const ReportEntry& a, const ReportEntry& b) {
    return std::tie(a.file, a.line) < std::tie(b.file, b.line);
  });
  for (const ReportEntry& e : inOrder)
    if (e.kind == ReportEntry::Automatic && (e.ruleId == "fabric-insert" || e.ruleId == "fabric-thread-fabric"))
      fabric.items.push_back(where(e) + ": " + e.text + " [" + e.ruleId + "]");
  doc.push_back({Block::Heading, 2, "Where the Fabric goes"});
  if (fabric.items.empty())
    doc.push_back({Block::Paragraph, 0, "Nowhere: no main and no training code that needs it was found."});
  else
    doc.push_back(fabric);

  doc.push_back({Block::Heading, 2, "Per rule"});
  std::map<std::string, std::array<size_t, 3>> perRule;
  for (const ReportEntry& e : data.entries) ++perRule[e.ruleId][e.kind];
  Block rules{Block::Table};
  rules.header = {"rule", kindName(ReportEntry::Automatic), kindName(ReportEntry::NeedsPerson),
                  kindName(ReportEntry::NotUnderstood)};
  for (const auto& [rule, counts] : perRule)
    rules.rows.push_back({rule, std::to_string(counts[0]), std::to_string(counts[1]), std::to_string(counts[2])});
  doc.push_back(rules);

  doc.push_back({Block::Heading, 2, "Per file"});
  std::map<std::string, std::vector<const ReportEntry*>> perFile;
  for (const ReportEntry& e : data.entries) perFile[e.file].push_back(&e);
  for (const std::string& file : data.files)
    if (!perFile.count(file)) perFile[file];
  for (auto& [file, entries] : perFile) {
    stableSort(entries, [](const ReportEntry* a, const ReportEntry* b) { return a->line < b->line; });
    doc.push_back({Block::Heading, 3, file});
    if (entries.empty()) {
      doc.push_back({Block::Paragraph, 0, "Nothing to migrate."});
      continue;
    }
    Block table{Block::Table};
    table.header = {"line", "rule", "what", "status"};
    for (const ReportEntry* e : entries)
      table.rows.push_back(
          {std::to_string(e->line), e->ruleId, e->text, std::string(kindName(e->kind)) + (e->error ? " (error)" : "")});
    doc.push_back(table);
    if (auto change = data.changes.find(file); change != data.changes.end() && !change->second.empty()) {
      doc.push_back({Block::Paragraph, 0, "The change, before (-) and after (+):"});
      Block diff{Block::Diff};
      diff.text = change->second;
      doc.push_back(diff);
    }
  }
  return doc;
}

std::string markdownCell(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

}  // namespace

ReportEntry::Kind findingKind(const std::string& ruleId, const std::string& message) {
  if (ruleId == "fabric-project" || message.rfind("internal error", 0) == 0 ||
      message.find("inside a macro expansion") != std::string::npos)
    return ReportEntry::NotUnderstood;
  return ReportEntry::NeedsPerson;
}

double ReportSummary::automaticShare() const {
  size_t all = automatic + needsPerson + notUnderstood;
  return all == 0 ? 100.0 : 100.0 * static_cast<double>(automatic) / static_cast<double>(all);
}

std::string loaderClassNamed(const std::string& explanation) {
  for (const std::string prefix : {"loader class `", "class `"}) {
    if (explanation.rfind(prefix, 0) != 0) continue;
    size_t end = explanation.find('`', prefix.size());
    return end == std::string::npos ? "" : explanation.substr(prefix.size(), end - prefix.size());
  }
  return "";
}

DataLoopEntry dataLoopOf(const std::string& file, unsigned line, const std::string& note,
                         const std::vector<std::string>& shardedLoaderClasses) {
  DataLoopEntry entry;
  entry.file = file;
  entry.line = line;
  auto after = [&](const std::string& prefix) { return note.substr(prefix.size()); };
  if (note.rfind("sharded: ", 0) == 0) {
    entry.status = DataLoopEntry::Sharded;
    entry.text = after("sharded: ");
  } else if (note.rfind("per rank: ", 0) == 0) {
    entry.status = DataLoopEntry::PerRank;
    entry.text = after("per rank: ");
  } else if (note.rfind("needs a person: ", 0) == 0) {
    entry.status = DataLoopEntry::NeedsPerson;
    entry.text = after("needs a person: ") + " (fabric-own-dataloader)";
  } else if (std::string name = loaderClassNamed(note); !name.empty()) {
    bool sharded =
        std::find(shardedLoaderClasses.begin(), shardedLoaderClasses.end(), name) != shardedLoaderClasses.end();
    entry.status = sharded ? DataLoopEntry::Sharded : DataLoopEntry::NeedsPerson;
    entry.text = sharded ? "its batches come from `" + name + "`, sharded where the class is defined"
                         : "its batches come from `" + name +
                               "`, a loader class of the project's own that was not sharded (see its "
                               "fabric-own-dataloader finding, or migrate the files that define it too)";
  } else {
    entry.status = DataLoopEntry::NotData;
    entry.text = note.rfind("not a data loop: ", 0) == 0 ? after("not a data loop: ") : note;
  }
  return entry;
}

ReportSummary summarize(const MigrationReportData& data) {
  ReportSummary s;
  for (const DataLoopEntry& loop : data.dataLoops) {
    ++s.loops;
    switch (loop.status) {
      case DataLoopEntry::Sharded:
        ++s.loopsSharded;
        break;
      case DataLoopEntry::PerRank:
        ++s.loopsPerRank;
        break;
      case DataLoopEntry::NeedsPerson:
        ++s.loopsNeedPerson;
        break;
      case DataLoopEntry::NotData:
        ++s.loopsNotData;
        break;
    }
  }
  for (const ReportEntry& e : data.entries) {
    if (e.kind == ReportEntry::Automatic)
      ++s.automatic;
    else if (e.kind == ReportEntry::NeedsPerson)
      ++s.needsPerson;
    else
      ++s.notUnderstood;
  }
  return s;
}

std::string renderMarkdownReport(const MigrationReportData& data) {
  std::string out;
  for (const Block& b : build(data)) {
    switch (b.kind) {
      case Block::Heading:
        out += std::string(b.level, '#') + " " + b.text + "\n\n";
        break;
      case Block::Paragraph:
        out += b.text + "\n\n";
        break;
      case Block::List:
        for (const std::string& item : b.items) out += "- " + item + "\n";
        out += "\n";
        break;
      case Block::Diff:
        out += "```diff\n" + b.text + (b.text.empty() || b.text.back() == '\n' ? "" : "\n") + "```\n\n";
        break;
      case Block::Table: {
        std::string line = "|", rule = "|";
        for (const std::string& h : b.header) {
          line += " " + markdownCell(h) + " |";
          rule += "---|";
        }
        out += line + "\n" + rule + "\n";
        for (const auto& row : b.rows) {
          line = "|";
          for (const std::string& cell : row) line += " " + markdownCell(cell) + " |";
          out += line + "\n";
        }
        out += "\n";
        break;
      }
    }
  }
  return out;
}

std::string renderHtmlReport(const MigrationReportData& data) {
  std::string out =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Migration report</title>\n"
      "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}"
      "pre.diff{background:#fafafa;border:1px solid #ddd;padding:.5em;overflow-x:auto}"
      ".diff .add{background:#e6ffec;display:block}.diff .del{background:#ffebe9;display:block}"
      ".diff .hunk{color:#6f42c1;display:block}.diff .file{color:#555;display:block}"
      ".diff .ctx{display:block}</style>\n"
      "</head><body>\n";
  for (const Block& b : build(data)) {
    switch (b.kind) {
      case Block::Heading: {
        std::string tag = "h" + std::to_string(b.level);
        out += "<" + tag + ">" + htmlEscaped(b.text) + "</" + tag + ">\n";
        break;
      }
      case Block::Paragraph:
        out += "<p>" + htmlEscaped(b.text) + "</p>\n";
        break;
      case Block::List:
        out += "<ul>\n";
        for (const std::string& item : b.items) out += "<li>" + htmlEscaped(item) + "</li>\n";
        out += "</ul>\n";
        break;
      case Block::Diff: {
        out += "<pre class=\"diff\">";
        size_t at = 0;
        while (at < b.text.size()) {
          size_t end = b.text.find('\n', at);
          std::string line = b.text.substr(at, end == std::string::npos ? std::string::npos : end - at);
          at = end == std::string::npos ? b.text.size() : end + 1;
          const char* cls = line.rfind("+++", 0) == 0 || line.rfind("---", 0) == 0 ? "file"
                            : line.rfind("@@", 0) == 0                             ? "hunk"
                            : !line.empty() && line[0] == '+'                      ? "add"
                            : !line.empty() && line[0] == '-'                      ? "del"
                                                                                   : "ctx";
          out += "<span class=\"" + std::string(cls) + "\">" + htmlEscaped(line) + "</span>";  // a block: its own line
        }
        out += "</pre>\n";
        break;
      }
      case Block::Table:
        out += "<table>\n<tr>";
        for (const std::string& h : b.header) out += "<th>" + htmlEscaped(h) + "</th>";
        out += "</tr>\n";
        for (const auto& row : b.rows) {
          out += "<tr>";
          for (const std::string& cell : row) out += "<td>" + htmlEscaped(cell) + "</td>";
          out += "</tr>\n";
        }
        out += "</table>\n";
        break;
    }
  }
  return out + "</body></html>\n";
}

}  // namespace fabricize
