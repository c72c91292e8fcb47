#include <fabric/options.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace fabric {
namespace {

// What choosing a name sets besides the option itself: Lightning's
// "ddp_find_unused_parameters_true" is "ddp" with find_unused_parameters.
enum class AlsoSets { nothing, find_unused_parameters, no_find_unused_parameters };

struct NamedValue {
  const char* name;       // what a user may write
  const char* canonical;  // what the getter returns
  AlsoSets also_sets = AlsoSets::nothing;
};

// A name Lightning knows that this build does not accept, and why: nullptr
// for "not available in this build yet", or a sentence saying what is not
// available in C++ and what to use instead.
struct UnavailableValue {
  const char* name;
  const char* why = nullptr;
};

// The values one option accepts, plus the names Lightning knows that this
// build does not implement, so that "fsdp" gets a precise answer instead
// of "invalid".
struct ChoiceSet {
  const char* option;
  std::vector<NamedValue> accepted;
  std::vector<UnavailableValue> not_yet_available;
};

std::string unavailable_text(const UnavailableValue& value) {
  if (value.why != nullptr) return std::string("'") + value.name + "' " + value.why;
  return std::string("'") + value.name + "' is not available in this build yet";
}

const ChoiceSet& accelerator_choices() {
  static const ChoiceSet set{"accelerator",
                             {{"auto", "auto"}, {"cpu", "cpu"}, {"cuda", "cuda"}, {"gpu", "cuda"}},
                             {{"mps"}, {"tpu"}, {"xla"}, {"hpu"}, {"ipu"}}};
  return set;
}

constexpr const char* kOffload =
    "offloads parameters or optimizer state to CPU memory, which is not available in C++. Use 'fsdp' "
    "(parameters, gradients and optimizer state sharded across ranks) or 'zero2' (optimizer state and "
    "gradients sharded)";

const ChoiceSet& strategy_choices() {
  static const ChoiceSet set{"strategy",
                             {{"auto", "auto"},
                              {"ddp", "ddp"},
                              {"ddp_find_unused_parameters_true", "ddp", AlsoSets::find_unused_parameters},
                              {"ddp_find_unused_parameters_false", "ddp", AlsoSets::no_find_unused_parameters},
                              {"single_device", "single_device"},
                              {"single-device", "single_device"},
                              {"zero2", "zero2"},
                              {"zero", "zero2"},
                              {"deepspeed", "zero2"},
                              {"deepspeed_stage_2", "zero2"},
                              {"zero1", "zero1"},
                              {"deepspeed_stage_1", "zero1"},
                              {"fsdp", "fsdp"},
                              {"zero3", "fsdp"},
                              {"deepspeed_stage_3", "fsdp"}},
                             {{"fsdp_cpu_offload", kOffload},
                              {"deepspeed_stage_3_offload", kOffload},
                              {"deepspeed_stage_2_offload", kOffload},
                              {"ddp_spawn"},
                              {"ddp_fork"},
                              {"ddp_notebook"},
                              {"dp"},
                              {"xla"},
                              {"model_parallel"}}};
  return set;
}

const ChoiceSet& precision_choices() {
  static const ChoiceSet set{"precision",
                             {{"32-true", "32-true"},
                              {"32", "32-true"},
                              {"64-true", "64-true"},
                              {"64", "64-true"},
                              {"16-mixed", "16-mixed"},
                              {"16", "16-mixed"},
                              {"bf16-mixed", "bf16-mixed"},
                              {"bf16", "bf16-mixed"},
                              {"16-true", "16-true"},
                              {"bf16-true", "bf16-true"}},
                             {{"transformer-engine"}, {"transformer-engine-float16"}}};
  return set;
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\n\r");
  if (first == std::string::npos) return {};
  const auto last = text.find_last_not_of(" \t\n\r");
  return text.substr(first, last - first + 1);
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Optimal string alignment distance: like Levenshtein, but a swap of two
// neighbours ("fspd" -> "fsdp") costs 1, the commonest typo.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string valid_values_text(const ChoiceSet& set) {
  std::string text = "Valid values: ";
  for (std::size_t i = 0; i < set.accepted.size(); ++i) {
    if (i > 0) text += ", ";
    text += "'" + std::string(set.accepted[i].name) + "'";
  }
  return text + ".";
}

}  // namespace

std::vector<std::string> Options::accepted_values(const std::string& option) {
  for (const ChoiceSet* set : {&accelerator_choices(), &strategy_choices(), &precision_choices()}) {
    if (option != set->option) continue;
    std::vector<std::string> names;
    for (const auto& accepted : set->accepted) names.emplace_back(accepted.name);
    return names;
  }
  throw std::invalid_argument("fabric::Options::accepted_values: no option '" + option +
                              "' with a list of names (accelerator, strategy, precision)");
}

namespace {

// `origin` names where the value came from when it was not the code
// ("LT_STRATEGY"), so an environment typo is not hunted for in the source.
std::string describe_value(const ChoiceSet& set, const std::string& value, const std::string& origin) {
  std::string text = std::string(set.option) + " '" + value + "'";
  if (!origin.empty()) text += " (from " + origin + ")";
  return text;
}

const NamedValue& accepted_choice(const ChoiceSet& set, const std::string& raw, const std::string& origin) {
  const std::string value = lowercase(trimmed(raw));
  for (const auto& accepted : set.accepted) {
    if (value == accepted.name) return accepted;
  }
  for (const auto& planned : set.not_yet_available) {
    if (value == planned.name) {
      std::string message = "fabric: " + describe_value(set, raw, origin);
      message +=
          planned.why != nullptr ? std::string(" ") + planned.why : std::string(" is not available in this build yet");
      throw std::invalid_argument(message + ". " + valid_values_text(set));
    }
  }

  std::string nearest;
  const UnavailableValue* nearest_planned = nullptr;
  std::size_t nearest_distance = std::string::npos;
  auto consider = [&](const std::string& candidate, const UnavailableValue* planned) {
    const std::size_t distance = edit_distance(value, candidate);
    const std::size_t allowed = candidate.size() <= 3 ? 1 : 2;
    if (distance <= allowed && distance < nearest_distance) {
      nearest = candidate;
      nearest_planned = planned;
      nearest_distance = distance;
    }
  };
  for (const auto& accepted : set.accepted) consider(accepted.name, nullptr);
  for (const auto& planned : set.not_yet_available) consider(planned.name, &planned);

  std::string message = "fabric: invalid " + describe_value(set, raw, origin);
  if (!nearest.empty()) {
    message += "; did you mean '" + nearest + "'?";
    if (nearest_planned != nullptr) message += " (" + unavailable_text(*nearest_planned) + ".)";
  } else {
    message += ".";
  }
  throw std::invalid_argument(message + " " + valid_values_text(set));
}

std::string canonical_choice(const ChoiceSet& set, const std::string& raw, const std::string& origin) {
  return accepted_choice(set, raw, origin).canonical;
}

// A strategy name may also choose find_unused_parameters; a plain name
// ("ddp") leaves whatever the code chose.
void apply_also_sets(const NamedValue& value, std::optional<bool>& find_unused_parameters) {
  if (value.also_sets == AlsoSets::find_unused_parameters) find_unused_parameters = true;
  if (value.also_sets == AlsoSets::no_find_unused_parameters) find_unused_parameters = false;
}

[[noreturn]] void throw_invalid_devices(const std::string& spec, const std::string& why) {
  throw std::invalid_argument("fabric: invalid devices '" + spec + "': " + why +
                              ". Use a count of processes (2), -1 for all visible devices, 'auto', "
                              "or a list of device indices ('0,2').");
}

// Whole-string integer parse; false on anything that is not one integer.
bool parse_int(const std::string& text, long& value) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  value = std::strtol(text.c_str(), &end, 10);
  return errno == 0 && end == text.c_str() + text.size();
}

void check_device_ids(const std::vector<int>& ids, const std::string& spec) {
  if (ids.empty()) throw_invalid_devices(spec, "the list of device indices is empty");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) throw_invalid_devices(spec, "device indices must be >= 0");
    if (std::find(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(i), ids[i]) !=
        ids.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw_invalid_devices(spec, "device " + std::to_string(ids[i]) + " is listed twice");
    }
  }
}

DeviceSelection device_count_selection(long count, const std::string& spec) {
  DeviceSelection selection;
  if (count == -1) {
    selection.kind = DeviceSelection::Kind::AllVisible;
  } else if (count >= 1 && count <= 1 << 16) {
    selection.kind = DeviceSelection::Kind::Count;
    selection.count = static_cast<int>(count);
  } else {
    throw_invalid_devices(spec, "a count must be >= 1 (or -1 for all visible devices)");
  }
  return selection;
}

}  // namespace

int DeviceSelection::process_count(int visible_devices) const {
  switch (kind) {
    case Kind::Auto:
    case Kind::AllVisible:
      return visible_devices;
    case Kind::Count:
      return count;
    case Kind::Ids:
      return static_cast<int>(ids.size());
  }
  return 1;
}

std::string DeviceSelection::to_string() const {
  switch (kind) {
    case Kind::Auto:
      return "auto";
    case Kind::AllVisible:
      return "-1";
    case Kind::Count:
      return std::to_string(count);
    case Kind::Ids: {
      std::string text;
      for (std::size_t i = 0; i < ids.size(); ++i) {
        text += (i > 0 ? "," : "") + std::to_string(ids[i]);
      }
      // A one-element list keeps its comma ("1,"), as in Lightning, so it is
      // not read back as a count.
      return ids.size() == 1 ? text + "," : text;
    }
  }
  return "auto";
}

DeviceSelection parse_devices(const std::string& spec) {
  std::string text = lowercase(trimmed(spec));
  if (text == "auto") return DeviceSelection{};
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = trimmed(text.substr(1, text.size() - 2)) + ",";
  }
  if (text.find(',') == std::string::npos) {
    long count = 0;
    if (!parse_int(text, count)) throw_invalid_devices(spec, "not a number, list or 'auto'");
    return device_count_selection(count, spec);
  }
  DeviceSelection selection;
  selection.kind = DeviceSelection::Kind::Ids;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = trimmed(text.substr(start, comma - start));
    // Only a trailing comma may leave an empty item ("1," = device 1).
    if (item.empty() && comma < text.size() - 1) throw_invalid_devices(spec, "empty list item");
    if (!item.empty()) {
      long id = 0;
      if (!parse_int(item, id) || id < 0 || id > 1 << 16) {
        throw_invalid_devices(spec, "'" + item + "' is not a device index");
      }
      selection.ids.push_back(static_cast<int>(id));
    }
    start = comma + 1;
  }
  check_device_ids(selection.ids, spec);
  return selection;
}

Options& Options::accelerator(std::string value) {
  accelerator_ = canonical_choice(accelerator_choices(), value, "");
  return *this;
}

Options& Options::devices(int count) {
  devices_ = device_count_selection(count, std::to_string(count));
  return *this;
}

Options& Options::devices(std::string spec) {
  devices_ = parse_devices(spec);
  return *this;
}

Options& Options::devices(std::vector<int> ids) {
  std::string spec;
  for (std::size_t i = 0; i < ids.size(); ++i) spec += (i > 0 ? "," : "") + std::to_string(ids[i]);
  check_device_ids(ids, spec);
  devices_ = DeviceSelection{DeviceSelection::Kind::Ids, 0, std::move(ids)};
  return *this;
}

Options& Options::devices(std::initializer_list<int> ids) { return devices(std::vector<int>(ids)); }

Options& Options::num_nodes(int count) {
  if (count < 1) {
    throw std::invalid_argument("fabric: invalid num_nodes " + std::to_string(count) + ": it must be >= 1.");
  }
  num_nodes_ = count;
  return *this;
}

Options& Options::strategy(std::string value) {
  const NamedValue& choice = accepted_choice(strategy_choices(), value, "");
  strategy_ = choice.canonical;
  apply_also_sets(choice, find_unused_parameters_);
  return *this;
}

Options& Options::precision(std::string value) {
  precision_ = canonical_choice(precision_choices(), value, "");
  return *this;
}

Options& Options::timeout(std::chrono::milliseconds value) {
  if (value.count() <= 0) {
    throw std::invalid_argument("fabric: the timeout must be positive, got " + std::to_string(value.count()) + " ms.");
  }
  timeout_ = value;
  return *this;
}

Options& Options::bucket_cap_mb(double value) {
  // Also rejects NaN.
  if (!(value > 0) || value > 1e6) {
    throw std::invalid_argument("fabric: invalid bucket_cap_mb " + std::to_string(value) +
                                ": it must be a size in MiB > 0 (PyTorch's default is 25).");
  }
  bucket_cap_mb_ = value;
  return *this;
}

Options& Options::fsdp_min_num_params(int64_t value) {
  if (value < 1) {
    throw std::invalid_argument("fabric: invalid fsdp_min_num_params " + std::to_string(value) +
                                ": it must be a parameter count >= 1 (a module whose parameters not yet in a "
                                "unit number at least this many becomes a unit of its own)");
  }
  fsdp_min_num_params_ = value;
  return *this;
}

Options& Options::fsdp_state_dict_type(const std::string& value) {
  if (value != "sharded" && value != "full") {
    throw std::invalid_argument("fabric: invalid fsdp_state_dict_type '" + value +
                                "': 'sharded' (every rank writes its part into a directory) or 'full' (one file)");
  }
  fsdp_state_dict_type_ = value;
  return *this;
}

Options& Options::override_from_environment() {
  // Validate everything before assigning anything, so a bad variable leaves
  // the options unchanged.
  Options updated = *this;
  auto variable = [](const char* name) -> const char* {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0' ? value : nullptr;
  };
  if (const char* value = variable("LT_ACCELERATOR")) {
    updated.accelerator_ = canonical_choice(accelerator_choices(), value, "LT_ACCELERATOR");
  }
  if (const char* value = variable("LT_STRATEGY")) {
    const NamedValue& choice = accepted_choice(strategy_choices(), value, "LT_STRATEGY");
    updated.strategy_ = choice.canonical;
    apply_also_sets(choice, updated.find_unused_parameters_);
  }
  if (const char* value = variable("LT_PRECISION")) {
    updated.precision_ = canonical_choice(precision_choices(), value, "LT_PRECISION");
  }
  if (const char* value = variable("LT_DEVICES")) {
    try {
      updated.devices_ = parse_devices(value);
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(std::string(error.what()) + " (from LT_DEVICES)");
    }
  }
  if (const char* value = variable("LT_NUM_NODES")) {
    long count = 0;
    if (!parse_int(trimmed(value), count) || count < 1 || count > 1 << 20) {
      throw std::invalid_argument(std::string("fabric: invalid num_nodes '") + value +
                                  "' (from LT_NUM_NODES): it must be an integer >= 1.");
    }
    updated.num_nodes_ = static_cast<int>(count);
  }
  *this = std::move(updated);
  return *this;
}

}  // namespace fabric
