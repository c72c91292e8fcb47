// fabric::Options: parsing, validation, error messages, environment overrides.
#include <fabric/options.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace {

// The message of the std::invalid_argument `action` throws ("" if none).
template <class Action>
std::string invalid_argument_message(Action&& action) {
  try {
    action();
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Sets an environment variable for the lifetime of the object.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    ::setenv(name, value, 1);
  }
  ~ScopedVariable() { ::unsetenv(name_); }

 private:
  const char* name_;
};

TEST(Options, Defaults) {
  const fabric::Options options;
  EXPECT_EQ(options.accelerator(), "auto");
  EXPECT_EQ(options.devices().kind, fabric::DeviceSelection::Kind::Auto);
  EXPECT_EQ(options.num_nodes(), 1);
  EXPECT_EQ(options.strategy(), "auto");
  EXPECT_EQ(options.precision(), "32-true");
  EXPECT_EQ(options.timeout(), std::chrono::minutes(30));
}

TEST(Options, ChainsAndCanonicalizes) {
  fabric::Options options;
  options.accelerator("GPU").devices(2).num_nodes(3).strategy("single-device").precision("32")
      .timeout(std::chrono::seconds(5));
  EXPECT_EQ(options.accelerator(), "cuda");
  EXPECT_EQ(options.devices().count, 2);
  EXPECT_EQ(options.num_nodes(), 3);
  EXPECT_EQ(options.strategy(), "single_device");
  EXPECT_EQ(options.precision(), "32-true");
  EXPECT_EQ(options.timeout(), std::chrono::seconds(5));
  EXPECT_EQ(fabric::Options().accelerator(" cpu ").accelerator(), "cpu");
  EXPECT_EQ(fabric::Options().strategy("ddp").strategy(), "ddp");
}

TEST(Options, MistypedStrategyNamesTheNearestAndTheValidOnes) {
  // The seed program's typo: "fspd" for "fsdp".
  const std::string message = invalid_argument_message([] { fabric::Options().strategy("fspd"); });
  EXPECT_TRUE(contains(message, "invalid strategy 'fspd'")) << message;
  EXPECT_TRUE(contains(message, "did you mean 'fsdp'?")) << message;
  EXPECT_TRUE(contains(message, "'fsdp'") && contains(message, "'zero2'") && contains(message, "'zero1'")) << message;
  EXPECT_TRUE(contains(message, "'ddp'") && contains(message, "'auto'") &&
              contains(message, "'single_device'"))
      << message;

  const std::string near_valid = invalid_argument_message([] { fabric::Options().strategy("dpp"); });
  EXPECT_TRUE(contains(near_valid, "did you mean 'ddp'?")) << near_valid;
  EXPECT_FALSE(contains(near_valid, "not available")) << near_valid;

  const std::string far = invalid_argument_message([] { fabric::Options().strategy("banana"); });
  EXPECT_TRUE(contains(far, "invalid strategy 'banana'")) << far;
  EXPECT_FALSE(contains(far, "did you mean")) << far;
  EXPECT_TRUE(contains(far, "Valid values: 'auto', 'ddp'")) << far;
}

TEST(Options, ShardedStrategiesAndLightningNames) {
  EXPECT_EQ(fabric::Options().strategy("zero2").strategy(), "zero2");
  EXPECT_EQ(fabric::Options().strategy("zero").strategy(), "zero2");
  EXPECT_EQ(fabric::Options().strategy("deepspeed").strategy(), "zero2");
  EXPECT_EQ(fabric::Options().strategy("DeepSpeed_Stage_2").strategy(), "zero2");
  EXPECT_EQ(fabric::Options().strategy("zero1").strategy(), "zero1");
  EXPECT_EQ(fabric::Options().strategy("deepspeed_stage_1").strategy(), "zero1");
  // Parameter sharding, by Lightning's names.
  EXPECT_EQ(fabric::Options().strategy("fsdp").strategy(), "fsdp");
  EXPECT_EQ(fabric::Options().strategy("zero3").strategy(), "fsdp");
  EXPECT_EQ(fabric::Options().strategy("deepspeed_stage_3").strategy(), "fsdp");
  EXPECT_EQ(fabric::Options().fsdp_min_num_params(), 1000000);
  EXPECT_EQ(fabric::Options().fsdp_min_num_params(10).fsdp_min_num_params(), 10);
  EXPECT_TRUE(contains(invalid_argument_message([] { fabric::Options().fsdp_min_num_params(0); }),
                       "invalid fsdp_min_num_params 0"));
  // Offloading is refused, naming what exists instead.
  for (const char* strategy : {"deepspeed_stage_2_offload", "fsdp_cpu_offload", "deepspeed_stage_3_offload"}) {
    const std::string offload = invalid_argument_message([&] { fabric::Options().strategy(strategy); });
    EXPECT_TRUE(contains(offload, "offloads parameters or optimizer state to CPU memory")) << offload;
    EXPECT_TRUE(contains(offload, "Use 'fsdp'") && contains(offload, "'zero2'")) << offload;
  }
  const std::string near = invalid_argument_message([] { fabric::Options().strategy("zer02"); });
  EXPECT_TRUE(contains(near, "did you mean 'zero2'?")) << near;
}

TEST(Options, DdpBucketsAndUnusedParameters) {
  const fabric::Options defaults;
  EXPECT_EQ(defaults.bucket_cap_mb(), 25.0);
  EXPECT_FALSE(defaults.find_unused_parameters());
  const auto options = fabric::Options().bucket_cap_mb(0.5).find_unused_parameters(true);
  EXPECT_EQ(options.bucket_cap_mb(), 0.5);
  EXPECT_TRUE(options.find_unused_parameters());
  for (double bad : {0.0, -1.0, std::nan("")}) {
    const std::string message = invalid_argument_message([&] { fabric::Options().bucket_cap_mb(bad); });
    EXPECT_TRUE(contains(message, "invalid bucket_cap_mb")) << message;
    EXPECT_TRUE(contains(message, "MiB > 0")) << message;
  }
}

// Lightning's names for DDP with or without the search for unused
// parameters: "ddp" plus the setting; the plain names leave the setting.
TEST(Options, FindUnusedParametersStrategyNames) {
  const auto on = fabric::Options().strategy("ddp_find_unused_parameters_true");
  EXPECT_EQ(on.strategy(), "ddp");
  EXPECT_TRUE(on.find_unused_parameters());
  const auto off = fabric::Options().find_unused_parameters(true).strategy(
      "DDP_Find_Unused_Parameters_False");
  EXPECT_EQ(off.strategy(), "ddp");
  EXPECT_FALSE(off.find_unused_parameters());
  EXPECT_TRUE(fabric::Options().find_unused_parameters(true).strategy("ddp").find_unused_parameters());
  EXPECT_TRUE(fabric::Options().find_unused_parameters(true).strategy("zero1").find_unused_parameters());
  EXPECT_FALSE(fabric::Options().strategy("ddp").find_unused_parameters());
  {
    ScopedVariable strategy("LT_STRATEGY", "ddp_find_unused_parameters_true");
    auto options = fabric::Options().strategy("zero2");
    options.override_from_environment();
    EXPECT_EQ(options.strategy(), "ddp");
    EXPECT_TRUE(options.find_unused_parameters());
  }
  {
    // A plain name from the environment keeps what the code chose.
    ScopedVariable strategy("LT_STRATEGY", "ddp");
    auto options = fabric::Options().strategy("ddp_find_unused_parameters_true");
    options.override_from_environment();
    EXPECT_TRUE(options.find_unused_parameters());
  }
  // Listed with the valid values, and the nearest name for a typo.
  const std::string typo = invalid_argument_message(
      [] { fabric::Options().strategy("ddp_find_unused_parameter_true"); });
  EXPECT_TRUE(contains(typo, "did you mean 'ddp_find_unused_parameters_true'?")) << typo;
  EXPECT_TRUE(contains(typo, "'ddp_find_unused_parameters_false'")) << typo;
}

TEST(Options, KnownButUnavailableValuesSaySo) {
  for (const char* strategy : {"ddp_spawn", "dp", "model_parallel"}) {
    const std::string message = invalid_argument_message([&] { fabric::Options().strategy(strategy); });
    EXPECT_TRUE(contains(message, std::string("strategy '") + strategy +
                                      "' is not available in this build yet"))
        << message;
    EXPECT_TRUE(contains(message, "'ddp'")) << message;
  }
  const std::string precision =
      invalid_argument_message([] { fabric::Options().precision("transformer-engine"); });
  EXPECT_TRUE(contains(precision, "precision 'transformer-engine' is not available in this build yet"))
      << precision;
  EXPECT_TRUE(contains(precision, "'32-true'")) << precision;
  const std::string accelerator = invalid_argument_message([] { fabric::Options().accelerator("tpu"); });
  EXPECT_TRUE(contains(accelerator, "'tpu' is not available")) << accelerator;
}

TEST(Options, MistypedAcceleratorAndPrecision) {
  const std::string accelerator = invalid_argument_message([] { fabric::Options().accelerator("cdua"); });
  EXPECT_TRUE(contains(accelerator, "did you mean 'cuda'?")) << accelerator;
  EXPECT_TRUE(contains(accelerator, "'cpu'")) << accelerator;
  const std::string precision = invalid_argument_message([] { fabric::Options().precision("32-tru"); });
  EXPECT_TRUE(contains(precision, "did you mean '32-true'?")) << precision;
  const std::string bf16 = invalid_argument_message([] { fabric::Options().precision("bf16-mixd"); });
  EXPECT_TRUE(contains(bf16, "did you mean 'bf16-mixed'?") && !contains(bf16, "not available"))
      << bf16;
  EXPECT_EQ(fabric::Options().precision("bf16").precision(), "bf16-mixed");
  EXPECT_EQ(fabric::Options().precision("16").precision(), "16-mixed");
  EXPECT_EQ(fabric::Options().precision("64").precision(), "64-true");
  EXPECT_EQ(fabric::Options().precision("bf16-true").precision(), "bf16-true");
}

TEST(Options, RejectsBadNumbers) {
  EXPECT_THROW(fabric::Options().num_nodes(0), std::invalid_argument);
  EXPECT_THROW(fabric::Options().timeout(std::chrono::milliseconds(0)), std::invalid_argument);
  EXPECT_THROW(fabric::Options().devices(0), std::invalid_argument);
  EXPECT_THROW(fabric::Options().devices(-2), std::invalid_argument);
  EXPECT_THROW(fabric::Options().devices(std::vector<int>{}), std::invalid_argument);
  EXPECT_THROW(fabric::Options().devices({1, 1}), std::invalid_argument);
  EXPECT_THROW(fabric::Options().devices({-1}), std::invalid_argument);
}

TEST(Devices, ParsesEveryForm) {
  using Kind = fabric::DeviceSelection::Kind;
  EXPECT_EQ(fabric::parse_devices("auto").kind, Kind::Auto);
  EXPECT_EQ(fabric::parse_devices(" AUTO ").kind, Kind::Auto);
  EXPECT_EQ(fabric::parse_devices("-1").kind, Kind::AllVisible);
  const auto two = fabric::parse_devices("2");
  EXPECT_EQ(two.kind, Kind::Count);
  EXPECT_EQ(two.count, 2);
  const auto list = fabric::parse_devices("0,2");
  EXPECT_EQ(list.kind, Kind::Ids);
  EXPECT_EQ(list.ids, (std::vector<int>{0, 2}));
  EXPECT_EQ(fabric::parse_devices("1,").ids, std::vector<int>{1});
  EXPECT_EQ(fabric::parse_devices("[0, 3]").ids, (std::vector<int>{0, 3}));
  EXPECT_EQ(fabric::parse_devices(" 3 ").count, 3);
}

TEST(Devices, RejectsMalformedSpecs) {
  for (const char* spec : {"", "0", "-2", "two", "0,,2", "1,1", "0,x", "1.5", "[", "2 3"}) {
    const std::string message = invalid_argument_message([&] { fabric::parse_devices(spec); });
    EXPECT_TRUE(contains(message, "invalid devices")) << "spec '" << spec << "': " << message;
  }
}

TEST(Devices, SettersAndRoundTrip) {
  using Kind = fabric::DeviceSelection::Kind;
  EXPECT_EQ(fabric::Options().devices(-1).devices().kind, Kind::AllVisible);
  EXPECT_EQ(fabric::Options().devices("auto").devices().kind, Kind::Auto);
  EXPECT_EQ(fabric::Options().devices("0,2").devices().ids, (std::vector<int>{0, 2}));
  EXPECT_EQ(fabric::Options().devices({0, 2}).devices().ids, (std::vector<int>{0, 2}));
  EXPECT_EQ(fabric::Options().devices(std::vector<int>{3}).devices().ids, std::vector<int>{3});
  for (const char* spec : {"auto", "-1", "4", "0,2", "1,"}) {
    EXPECT_EQ(fabric::parse_devices(spec).to_string(), spec);
  }
  EXPECT_EQ(fabric::parse_devices("auto").process_count(1), 1);
  EXPECT_EQ(fabric::parse_devices("-1").process_count(8), 8);
  EXPECT_EQ(fabric::parse_devices("3").process_count(1), 3);
  EXPECT_EQ(fabric::parse_devices("0,2").process_count(4), 2);
}

TEST(Environment, LightningVariablesOverrideTheCode) {
  ScopedVariable accelerator("LT_ACCELERATOR", "cpu");
  ScopedVariable devices("LT_DEVICES", "3");
  ScopedVariable strategy("LT_STRATEGY", "ddp");
  ScopedVariable precision("LT_PRECISION", "32");
  ScopedVariable nodes("LT_NUM_NODES", "2");
  fabric::Options options;
  options.accelerator("cuda").devices(1).strategy("single_device").num_nodes(1);
  options.override_from_environment();
  EXPECT_EQ(options.accelerator(), "cpu");
  EXPECT_EQ(options.devices().count, 3);
  EXPECT_EQ(options.strategy(), "ddp");
  EXPECT_EQ(options.precision(), "32-true");
  EXPECT_EQ(options.num_nodes(), 2);
}

TEST(Environment, EmptyOrUnsetVariablesChangeNothing) {
  ScopedVariable empty("LT_STRATEGY", "");
  fabric::Options options;
  options.strategy("single_device").override_from_environment();
  EXPECT_EQ(options.strategy(), "single_device");
}

TEST(Environment, InvalidVariableNamesItselfAndChangesNothing) {
  ScopedVariable devices("LT_DEVICES", "2");
  ScopedVariable strategy("LT_STRATEGY", "fspd");
  fabric::Options options;
  options.devices(1);
  const std::string message = invalid_argument_message([&] { options.override_from_environment(); });
  EXPECT_TRUE(contains(message, "(from LT_STRATEGY)")) << message;
  EXPECT_TRUE(contains(message, "did you mean 'fsdp'?")) << message;
  EXPECT_EQ(options.devices().count, 1);  // nothing applied

  ScopedVariable nodes("LT_NUM_NODES", "zero");
  ::unsetenv("LT_STRATEGY");
  const std::string nodes_message = invalid_argument_message([&] { options.override_from_environment(); });
  EXPECT_TRUE(contains(nodes_message, "LT_NUM_NODES")) << nodes_message;
  ::unsetenv("LT_NUM_NODES");
  ScopedVariable bad_devices("LT_DEVICES", "two");
  const std::string devices_message = invalid_argument_message([&] { options.override_from_environment(); });
  EXPECT_TRUE(contains(devices_message, "LT_DEVICES")) << devices_message;
}

} // namespace
