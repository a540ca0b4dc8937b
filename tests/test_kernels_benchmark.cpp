// The machinery of `gerbil bench kernels` on the default adapter (lavapipe in CI), on a few quick cases:
// numbers come out positive and finite and follow the metric formulas, variants run beside their seed
// kernel with the speed-up, the JSON is well-formed, record_timed times a prepared Dispatch, and
// warm_until_at_speed stops when its probe is at its usual speed or at its time limit. Timings themselves are
// never asserted.
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gerbil/error.h"
#include "checks/benchmark.h"
#include "kernels/seed.h"

namespace gerbil::kernels::bench {
namespace {

using ::testing::HasSubstr;

gpu::DeviceOptions profiling_options() {
  gpu::DeviceOptions options;
  gpu::request_precise_timestamps(options);
  return options;
}

gpu::Device& device() {
  static gpu::Device shared(profiling_options());
  return shared;
}

// Made-up ceilings: the percentages they give are checked exactly.
const Ceilings kCeilings{.bandwidth_gbps = 10, .copy_bytes = 1, .copy_ms = 1, .gflops = 100, .fma_flops = 1,
                         .fma_ms = 1, .floor_ms = 0.5};

bool positive(double value) { return std::isfinite(value) && value > 0; }

void expect_measured(const Result& r) {
  EXPECT_EQ(r.error, "") << r.kernel << " " << r.shape;
  EXPECT_TRUE(positive(r.ms)) << r.ms;
  EXPECT_TRUE(positive(r.ms_mean)) << r.ms_mean;
  EXPECT_TRUE(positive(r.ms_min)) << r.ms_min;
  EXPECT_LE(r.ms_min, r.ms);
  double work = r.metric == Metric::Gflops ? r.flops : r.bytes;
  EXPECT_DOUBLE_EQ(r.value, work / (r.ms * 1e6));
  EXPECT_DOUBLE_EQ(r.ceiling_percent, 100 * r.value / kCeilings.of(r.metric));
}

TEST(KernelBenchmark, RunsOneQuickKernel) {
  Options options{.quick = true, .kernel = "add", .iterations = 2};
  std::vector<std::string> streamed;
  auto all = run(device(), options, kCeilings, [&](const Result& r) { streamed.push_back(r.shape); });
  ASSERT_EQ(all.size(), 4u);  // --quick: T = 1 and 50, each the seed and add_vec4
  EXPECT_EQ(streamed, (std::vector<std::string>{"T=1", "T=1", "T=50", "T=50"}));
  std::vector<Result> results;
  for (const Result& r : all)
    if (r.seed.empty()) results.push_back(r);
  ASSERT_EQ(results.size(), 2u);
  for (const Result& r : results) {
    expect_measured(r);
    EXPECT_EQ(r.kernel, "add");
    EXPECT_EQ(r.seed, "");
    EXPECT_EQ(r.iterations, 2u);
    EXPECT_EQ(r.metric, Metric::Gbps);
    ASSERT_EQ(r.dispatches.size(), 1u);
  }
  // The reference's element-wise formula: count * 4 * (inputs + 1), count = T * hidden (896).
  EXPECT_DOUBLE_EQ(results[0].bytes, 896.0 * 4 * 3);
  EXPECT_DOUBLE_EQ(results[1].bytes, 50 * 896.0 * 4 * 3);
  EXPECT_EQ(results[1].dispatches[0], "add count=44800");
}

TEST(KernelBenchmark, VariantRunsBesideItsSeedKernelWithTheSpeedUp) {
  Options options{.quick = true, .kernel = "gated_act", .iterations = 1};
  auto results = run(device(), options, kCeilings);
  ASSERT_EQ(results.size(), 4u);
  for (size_t i = 0; i < results.size(); i += 2) {
    const Result &seed = results[i], &variant = results[i + 1];
    expect_measured(seed);
    expect_measured(variant);
    EXPECT_EQ(seed.kernel, "silu+mul");
    EXPECT_EQ(variant.kernel, "gated_act");
    EXPECT_EQ(variant.seed, "silu+mul");
    EXPECT_EQ(seed.shape, variant.shape);
    EXPECT_DOUBLE_EQ(variant.speedup, seed.ms / variant.ms);
    EXPECT_EQ(seed.speedup, 0);
    EXPECT_EQ(seed.dispatches.size(), 2u);  // silu, then mul
    EXPECT_THAT(seed.dispatches[0], HasSubstr("silu count="));
    EXPECT_THAT(seed.dispatches[1], HasSubstr("mul count="));
    EXPECT_THAT(format_row(variant), HasSubstr(fmt::format("{:.2f}x", variant.speedup)));
  }
}

TEST(KernelBenchmark, MatmulCasesCountTwoFlopsPerMultiplyAdd) {
  Options options{.quick = true, .kernel = "matmul_int4", .iterations = 1};
  auto results = run(device(), options, kCeilings);
  ASSERT_FALSE(results.empty());
  const Result& first = results[0];
  EXPECT_EQ(first.kernel, "matmul_int4");
  EXPECT_EQ(first.shape, "q_proj M=1 K=896 N=896");
  EXPECT_DOUBLE_EQ(first.flops, 2.0 * 896 * 896);
  EXPECT_EQ(first.metric, Metric::Gflops);
  EXPECT_EQ(results[1].kernel, "linear");  // the GPTQ layer as the graph runs it: Q4_G blocks
  EXPECT_THAT(results[1].variant, HasSubstr("Q4_G"));
  for (const Result& r : results) expect_measured(r);
}

// A decode product reads copies of its weight in turn (cold caches: not --quick); its note says once how the work
// was shared out, not once per copy.
TEST(KernelBenchmark, SplitProductNotesTheirSharesOncePerBlock) {
  Options options{.kernel = "matmul_int4", .shape = "q_proj M=1 ", .iterations = 1};
  auto results = run(device(), options, kCeilings);
  ASSERT_EQ(results.size(), 2u);
  const Result& product = results[1];
  EXPECT_THAT(product.note,
              ::testing::AllOf(::testing::StartsWith("whole tiles, "), HasSubstr("weight copies read in turn")));
}

TEST(KernelBenchmark, ShapeFilterKeepsOnlyMatchingShapes) {
  Options options{.quick = true, .kernel = "rmsnorm_vec4", .shape = "T=50", .iterations = 1};
  auto results = run(device(), options, kCeilings);
  ASSERT_EQ(results.size(), 2u);  // the seed and rmsnorm_vec4 at T = 50 only
  for (const Result& r : results) EXPECT_EQ(r.shape, "T=50");
  options.shape = "no such shape";
  EXPECT_THAT([&] { run(device(), options, kCeilings); },
              ThrowsMessage<Error>(HasSubstr("no shape name contains 'no such shape'")));
}

// Tuning rows: each requested decode blocking, bare and with a fused norm, beside the fixed variants of the
// decode shapes; each requested split count beside the prompt shapes'. Out-of-range requests are error rows.
TEST(KernelBenchmark, TuningRowsFollowTheRequestedBlockingsAndSplits) {
  if (!kernels::linear_can_fuse(device(), 1, 896, WeightType::F16)) GTEST_SKIP() << "the adapter lacks subgroups";
  Options options{.quick = true, .kernel = "linear", .shape = "qwen o M=", .iterations = 1};
  options.blockings = {{1, 2, 1}, {1, 3, 1}};
  options.split_workers = {42};
  std::vector<std::string> variants, errors;
  for (const Result& r : run(device(), options, kCeilings, nullptr)) {
    variants.push_back(r.shape + " | " + r.variant + " | " + r.note);
    if (!r.error.empty()) errors.push_back(r.error);
  }
  auto has = [&](const std::string& text) {
    return std::any_of(variants.begin(), variants.end(), [&](const std::string& v) { return v.find(text) == 0; });
  };
  EXPECT_TRUE(has("qwen o M=1 K=896 N=896 | f16 matvec c1 s2 u1 | ")) << testing::PrintToString(variants);
  EXPECT_TRUE(has("qwen o M=1 K=896 N=896 | f16 matvec c1 s2 u1 norm | "));
  EXPECT_TRUE(has("qwen o M=50 K=896 N=896 | f16 tiled split42 | 42 workers"));
  EXPECT_FALSE(has("qwen o M=50 K=896 N=896 | f16 tiled c1"));  // blockings are for decoding shapes only
  // Split 3 is not a power of two: the f16 bare and norm rows; the Q4_0 rows take the split as their team of lanes,
  // at least 16 (Q4_K's rows are skipped: 896 is not whole super-blocks).
  ASSERT_EQ(errors.size(), 4u) << testing::PrintToString(errors);
  EXPECT_EQ(std::count_if(errors.begin(), errors.end(),
                          [](const std::string& e) { return e.find("split 3 must be a power of two") != e.npos; }),
            2);
  EXPECT_THAT(errors, testing::Contains(testing::HasSubstr("type=Q4_0): a team of 2 lanes requested")));
  EXPECT_THAT(errors, testing::Contains(testing::HasSubstr("type=Q4_0): a team of 3 lanes requested")));
}

TEST(KernelBenchmark, BlockingTextIsThreeOrFourWholeNumbers) {
  MatvecBlocking b = parse_blocking("1,2,0");
  EXPECT_EQ(std::vector<uint32_t>({b.columns, b.split, b.unroll, b.workgroups}), std::vector<uint32_t>({1, 2, 0, 0}));
  b = parse_blocking("2,8,1,1056");
  EXPECT_EQ(std::vector<uint32_t>({b.columns, b.split, b.unroll, b.workgroups}),
            std::vector<uint32_t>({2, 8, 1, 1056}));
  for (const char* bad : {"2,4", "1,2,1,4,5", "-1,1,1", "1, 2, 1", "a,b,c", "", "1,2,1x", "1,2,1,4x", "1,2,1,", "1,2,,1"})
    EXPECT_THAT([&] { parse_blocking(bad); }, testing::ThrowsMessage<Error>(HasSubstr(fmt::format(
                                                  "--blocking '{}' is not COLUMNS,SPLIT,UNROLL[,WORKGROUPS]", bad))))
        << bad;
}

TEST(KernelBenchmark, HostClockWhenForced) {
  Options options{.quick = true, .kernel = "rmsnorm", .iterations = 3, .clock = gpu::TimerClock::Host};
  EXPECT_FALSE(uses_timestamps(device(), options));
  auto results = run(device(), options, kCeilings);
  ASSERT_EQ(results.size(), 4u);  // T = 1 and 50, each the seed and rmsnorm_vec4
  for (const Result& r : results) {
    expect_measured(r);
    EXPECT_EQ(r.ms, r.ms_mean);  // the host clock sees only the total
  }
  EXPECT_EQ(to_json(device(), options, kCeilings, results)["timing"], "host");
}

TEST(KernelBenchmark, CeilingsArePositiveAndFinite) {
  Ceilings ceilings = measure_ceilings(device(), {.quick = true});
  EXPECT_TRUE(positive(ceilings.bandwidth_gbps));
  EXPECT_TRUE(positive(ceilings.gflops));
  EXPECT_GE(ceilings.copy_bytes, 2.0 * (1 << 20));  // at least 1 MiB each way
  EXPECT_DOUBLE_EQ(ceilings.bandwidth_gbps, ceilings.copy_bytes / (ceilings.copy_ms * 1e6));
  EXPECT_DOUBLE_EQ(ceilings.gflops, ceilings.fma_flops / (ceilings.fma_ms * 1e6));
  EXPECT_EQ(ceilings.of(Metric::Gbps), ceilings.bandwidth_gbps);
  EXPECT_EQ(ceilings.of(Metric::Gflops), ceilings.gflops);
  // An empty dispatch costs something, and less than copying a MiB.
  EXPECT_TRUE(positive(ceilings.floor_ms));
  EXPECT_TRUE(positive(ceilings.probe_ms));
  EXPECT_LT(ceilings.floor_ms, ceilings.copy_ms);
}

TEST(KernelBenchmark, BandwidthKernelsAlsoRunAtLlamaSizes) {
  // Llama-3-8B's hidden (4096) and intermediate (14336) sizes at T = 2048, beside Qwen2.5-0.5B's.
  EXPECT_NO_THROW(check_options({.kernel = "rmsnorm_vec4", .shape = "llama T=2048"}));
  EXPECT_NO_THROW(check_options({.kernel = "mul_vec4", .shape = "llama T=2048 count=29360128"}));
  EXPECT_NO_THROW(check_options({.kernel = "gelu_vec4", .shape = "T=2048 count=9961472"}));
}

TEST(KernelBenchmark, JsonIsWellFormed) {
  Options options{.quick = true, .kernel = "flash_attention", .iterations = 1};
  auto results = run(device(), options, kCeilings);
  std::string text = to_json(device(), options, kCeilings, results).dump(2);
  nlohmann::json json = nlohmann::json::parse(text);  // throws if malformed
  EXPECT_EQ(json["adapter"]["summary"], device().adapter().summary());
  EXPECT_EQ(json["timing"], uses_timestamps(device(), options) ? "gpu-timestamps" : "host");
  EXPECT_EQ(json["quick"], true);
  EXPECT_EQ(json["ceilings"]["bandwidth_gbps"], 10.0);
  EXPECT_EQ(json["ceilings"]["gflops"], 100.0);
  EXPECT_EQ(json["ceilings"]["floor_ms"], 0.5);
  ASSERT_EQ(json["results"].size(), results.size());
  // decode S=128, decode S=2048, prefill T=S=50; the seed, then flash_attention over f32, f16 and q8 caches, each
  ASSERT_EQ(results.size(), 12u);
  for (size_t i = 0; i < results.size(); ++i) {
    const nlohmann::json& row = json["results"][i];
    EXPECT_EQ(row["kernel"], results[i].kernel);
    EXPECT_EQ(row["shape"], results[i].shape);
    EXPECT_EQ(row["metric"], "GFLOPS");
    EXPECT_GT(row["ms"].get<double>(), 0);
    EXPECT_EQ(row["value"].get<double>(), results[i].value);
    EXPECT_FALSE(row.contains("error"));
    EXPECT_EQ(row.contains("speedup"), results[i].kernel == "flash_attention");
  }
  // The reference's attention formula: 2 * T * S * head_dim * heads, whatever the cache type.
  for (size_t i = 4; i < 8; ++i) EXPECT_DOUBLE_EQ(results[i].flops, 2.0 * 1 * 2048 * 64 * 14);
  EXPECT_EQ(results[5].variant, "f32 cache");
  EXPECT_EQ(results[6].variant, "f16 cache");
  EXPECT_EQ(results[7].variant, "q8 cache");
}

TEST(KernelBenchmark, UnknownKernelNamesTheKnownOnes) {
  EXPECT_THAT([] { check_options({.kernel = "nope"}); },
              ::testing::ThrowsMessage<Error>(::testing::AllOf(HasSubstr("no kernel named 'nope'"), HasSubstr("flash_attention"))));
  EXPECT_THAT([] { run(device(), {.kernel = "nope"}, kCeilings); },
              ::testing::ThrowsMessage<Error>(HasSubstr("no kernel named 'nope'")));
}

TEST(KernelBenchmark, EveryOptimisedKernelIsPairedWithItsSeed) {
  auto names = kernel_names();
  for (const char* name : {"matmul", "linear", "matmul_int4", "attention", "flash_attention",
                           "embedding", "embed", "silu+mul", "gated_act", "rope", "qkv_rope_store"})
    EXPECT_THAT(names, ::testing::Contains(std::string(name)));
  // Variants follow their seed kernel.
  auto at = [&](const char* name) { return std::find(names.begin(), names.end(), name) - names.begin(); };
  EXPECT_EQ(at("linear"), at("matmul") + 1);
  EXPECT_EQ(at("flash_attention"), at("attention") + 1);
}

TEST(KernelBenchmark, ErrorRowsSayWhatFailed) {
  Result failed{.kernel = "linear", .variant = "f16 matvec", .shape = "T=1", .seed = "matmul"};
  failed.error = "kernel 'linear': boom";
  EXPECT_THAT(format_row(failed), HasSubstr("error: kernel 'linear': boom"));
  nlohmann::json json = to_json(device(), {}, kCeilings, {failed});
  EXPECT_EQ(json["results"][0]["error"], "kernel 'linear': boom");
  EXPECT_FALSE(json["results"][0].contains("ms"));
}

TEST(KernelBenchmark, SkippedRowsSayWhyAndCarryNoTimes) {
  Result skipped{.kernel = "linear", .variant = "f16 matvec norm", .shape = "T=1", .seed = "matmul"};
  skipped.skipped = "fusions need the subgroup decode variant";
  EXPECT_THAT(format_row(skipped), HasSubstr("not run: fusions need the subgroup decode variant"));
  nlohmann::json json = to_json(device(), {}, kCeilings, {skipped});
  EXPECT_EQ(json["results"][0]["skipped"], "fusions need the subgroup decode variant");
  EXPECT_FALSE(json["results"][0].contains("ms"));
  EXPECT_FALSE(json["results"][0].contains("error"));
}

TEST(RecordTimed, TimesAPreparedDispatchUnderItsKernelName) {
  std::vector<float> a = {1, 2, 3}, b = {10, 20, 30};
  gpu::Buffer A = device().upload("a", std::span<const float>(a));
  gpu::Buffer B = device().upload("b", std::span<const float>(b));
  gpu::Buffer out = device().create_buffer("out", 12);
  Dispatch dispatch = add(device(), {&A}, {&B}, {&out}, {3});
  gpu::GpuTimer timer(device(), 1);
  gpu::Recorder recorder(device(), "timed add");
  record_timed(timer, recorder, dispatch);
  auto timings = timer.collect(recorder);
  ASSERT_EQ(timings.size(), 1u);
  EXPECT_EQ(timings[0].label, "add");
  EXPECT_GT(timings[0].ns, 0);
  EXPECT_EQ(device().read_as<float>(out), (std::vector<float>{11, 22, 33}));
}

// A tiny probe for warm_until_at_speed: out = a + a over 3 elements.
struct AddProbe {
  gpu::Buffer a = device().upload("a", std::span<const float>(std::vector<float>{1, 2, 3}));
  gpu::Buffer out = device().create_buffer("out", 12);
  Dispatch probe = add(device(), {&a}, {&a}, {&out}, {3});

  Warmed warm(double baseline_ms, double max_s) {
    return warm_until_at_speed(device(), std::span(&probe, 1), baseline_ms, device().features().timestamp_query,
                               max_s);
  }
};

TEST(WarmUntilAtSpeed, ReturnsAtOnceWhenTheProbeIsAtItsUsualSpeed) {
  AddProbe p;
  Warmed warmed = p.warm(1e9, 5);
  EXPECT_LT(warmed.slowdown, 1);
  EXPECT_LT(warmed.warming_s, 5);
  EXPECT_EQ(device().read_as<float>(p.out), (std::vector<float>{2, 4, 6}));  // the probe ran
}

TEST(WarmUntilAtSpeed, GivesUpAfterItsLimitAndSaysHowSlow) {
  AddProbe p;
  // A baseline no adapter reaches: never warmed.
  Warmed warmed = p.warm(1e-9, 0.2);
  EXPECT_GE(warmed.warming_s, 0.2);
  EXPECT_LT(warmed.warming_s, 5);
  EXPECT_GT(warmed.slowdown, 1 + kWarmTolerance);
}

}  // namespace
}  // namespace gerbil::kernels::bench
