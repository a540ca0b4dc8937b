// Host-side throughput of kernels::pack_rows(): the repacking of ggml's quantized blocks into the GPU layout that
// every 4/8-bit GGUF file goes through at load (graph/gpu_weights.cpp runs it on every core). Bytes per second
// count the ggml bytes read; the shape is one of Llama-3-8B's down projections (K = 14336), 64 rows at a time as
// the loader's 1 MiB pieces make them.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/model.h"

namespace {

using gerbil::kernels::WeightType;

void BM_PackRows(benchmark::State& state) {
  auto type = static_cast<WeightType>(state.range(0));
  constexpr uint64_t kRows = 64, kK = 14336;
  gerbil::kernels::BlockLayout layout = gerbil::kernels::block_layout(type);
  std::vector<std::byte> ggml(kRows * kK / layout.elements * layout.ggml_bytes);
  std::mt19937 rng(1);
  for (auto& b : ggml) b = std::byte(rng());
  std::vector<std::byte> packed(kRows * gerbil::kernels::weight_row_bytes(type, kK));
  for (auto _ : state) {
    gerbil::kernels::pack_rows(type, ggml, kRows, kK, "bench", packed);
    benchmark::DoNotOptimize(packed.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(ggml.size()));
  state.SetLabel(gerbil::kernels::weight_type_name(type));
}

BENCHMARK(BM_PackRows)
    ->Arg(int(WeightType::Q8_0))
    ->Arg(int(WeightType::Q4_0))
    ->Arg(int(WeightType::Q4_1))
    ->Arg(int(WeightType::Q5_0))
    ->Arg(int(WeightType::Q5_1))
    ->Arg(int(WeightType::Q4_K))
    ->Arg(int(WeightType::Q5_K))
    ->Arg(int(WeightType::Q6_K))
    ->Arg(int(WeightType::Q3_K))
    ->Arg(int(WeightType::Q2_K))
    ->Arg(int(WeightType::IQ4_NL))
    ->Arg(int(WeightType::IQ4_XS));

}  // namespace

BENCHMARK_MAIN();
