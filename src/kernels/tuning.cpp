#include "kernels/tuning.h"

#include <bit>
#include <chrono>
#include <cstdio>
#include <fstream>

#include <unistd.h>

#include <nlohmann/json.hpp>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "gerbil/error.h"
#include "gpu/profiler.h"
#include "kernels/dispatch.h"

namespace gerbil::kernels {
namespace {

constexpr int kTuningVersion = 2;  // 2: probed on GPU timestamps (files of 1 may hold a noisy count)
constexpr double kWaveJump = 1.5;            // a count this much slower than one workgroup ran in two waves
constexpr double kMinRoundSeconds = 0.005;   // one wave's time, far above a submit's overhead and Dawn's timestamp quantum
constexpr uint32_t kMaxRounds = 1u << 20;
// Probed at most (a power of two within WebGPU's 65,535 workgroups a dimension): more resident than this is taken
// as this.
constexpr uint32_t kMaxWorkgroups = 1u << 15;
// The probe dispatches up to kMaxWorkgroups in one dimension: within the 65,535 every WebGPU adapter allows (a probe
// once asked for 65,536 and the H200 refused it).
static_assert(kMaxWorkgroups <= 65535);
constexpr uint32_t kTileShare = 4;           // resident_tiles = resident_workgroups / kTileShare
constexpr uint32_t kTiledFillWaves = 2;              // tiled_fill: 1 / kTiledFillWaves of the resident tiles
constexpr uint32_t kPreparedNormHiddenPerWorkgroup = 4;  // prepared_norm_min_hidden's hidden size a workgroup

struct ProbeParams {
  uint32_t rounds;
  float seed;
};

// Seconds for `workgroups` probe workgroups of `rounds` rounds each: the fastest of kRuns runs, on the GPU's
// timestamps where the adapter has them. The host's clock also counts the wake-up after the queue drains, which
// the OS may delay by milliseconds on a busy machine: on an H200 whose cores were compiling, a one-wave run then
// looked like two, and the tuning came out at a quarter of the GPU (prompt products shared over a quarter of
// the SMs ran 4.6x slower).
class Probe {
 public:
  explicit Probe(gpu::Device& device)
      : device_(device),
        out_(device.create_buffer("resident probe out", uint64_t(kMaxWorkgroups) * 4)),
        timer_(device, kRuns) {}

  double seconds(uint32_t workgroups, uint32_t rounds) {
    Dispatch dispatch = prepare(device_, "resident_probe", fmt::format("workgroups={} rounds={}", workgroups, rounds),
                                {{"out", {&out_}, workgroups}}, ProbeParams{rounds, 1.0f}, Grid{workgroups, 1, 1});
    gpu::Recorder recorder(device_, "resident probe");
    for (uint32_t run = 0; run < kRuns; ++run)
      timer_.dispatch(recorder, *dispatch.pipeline, dispatch.bind_group, dispatch.grid, dispatch.kernel);
    double best = 1e30;
    for (const gpu::Timing& timing : timer_.collect(recorder)) best = std::min(best, timing.ns * 1e-9);
    return best;
  }

 private:
  static constexpr uint32_t kRuns = 3;
  gpu::Device& device_;
  gpu::Buffer out_;
  gpu::GpuTimer timer_;
};

std::string hex(uint64_t value) { return fmt::format("{:016x}", value); }

}  // namespace

std::string adapter_key(const gpu::AdapterInfo& a) {
  std::string names = a.vendor + "\n" + a.architecture + "\n" + a.device + "\n" + a.description + "\n" + a.backend;
  std::string backend;
  for (char c : a.backend)
    if (std::isalnum(static_cast<unsigned char>(c))) backend += char(std::tolower(static_cast<unsigned char>(c)));
  return fmt::format("{:04x}-{:04x}-{}-{}", a.vendor_id, a.device_id, backend,
                     hex(XXH3_64bits(names.data(), names.size())).substr(0, 8));
}

std::filesystem::path tuning_file(const gpu::AdapterInfo& adapter) {
  std::filesystem::path folder = gpu::cache_dir();
  if (folder.empty()) return {};
  return folder / fmt::format("tuning-{}.json", adapter_key(adapter));
}

Tuning probe_tuning(gpu::Device& device) {
  auto start = std::chrono::steady_clock::now();
  Probe probe(device);
  uint32_t rounds = 1;
  double one = probe.seconds(1, rounds);
  while (one < kMinRoundSeconds && rounds < kMaxRounds) {
    rounds = std::min(kMaxRounds, rounds * std::max<uint32_t>(2, uint32_t(kMinRoundSeconds / std::max(one, 1e-6))));
    one = probe.seconds(1, rounds);
  }
  auto second_wave = [&](uint32_t workgroups) { return probe.seconds(workgroups, rounds) > kWaveJump * one; };
  // Doubling finds a count in a second wave (high) above one that is not (low); bisection the first such count.
  uint32_t low = 1, high = 2;
  while (high < kMaxWorkgroups && !second_wave(high)) low = high, high *= 2;
  if (high >= kMaxWorkgroups && !second_wave(high)) low = high;
  while (high - low > 1) {
    uint32_t middle = low + (high - low) / 2;
    (second_wave(middle) ? high : low) = middle;
  }
  Tuning tuning;
  tuning.resident_workgroups = low;
  tuning.resident_tiles = std::max<uint32_t>(1, low / kTileShare);
  tuning.probe_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return tuning;
}

uint32_t tiled_fill(uint32_t resident_tiles) {
  return std::bit_floor(std::max<uint32_t>(1, resident_tiles / kTiledFillWaves));
}

uint32_t prepared_norm_min_hidden(uint32_t resident_workgroups) {
  return std::bit_floor(std::max<uint32_t>(1, resident_workgroups) * kPreparedNormHiddenPerWorkgroup);
}

void write_tuning(const std::filesystem::path& file, const gpu::AdapterInfo& adapter, const Tuning& tuning) {
  nlohmann::json json = {{"version", kTuningVersion},
                         {"adapter", adapter.summary()},
                         {"resident_workgroups", tuning.resident_workgroups},
                         {"resident_tiles", tuning.resident_tiles},
                         {"probe_seconds", tuning.probe_seconds}};
  std::error_code error;
  std::filesystem::create_directories(file.parent_path(), error);
  // A name of this process's own, so that replicas starting together never write into one file.
  std::filesystem::path temporary = file.string() + fmt::format(".{}.tmp", ::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << json.dump(2) << "\n";
    if (!out) fail("tuning: cannot write {}", temporary.string());
  }
  std::filesystem::rename(temporary, file, error);
  if (error) fail("tuning: cannot move {} to {}: {}", temporary.string(), file.string(), error.message());
}

Tuning read_tuning(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) fail("tuning file {}: cannot open it", file.string());
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) fail("tuning file {}: not a JSON object", file.string());
  if (json.value("version", 0) != kTuningVersion)
    fail("tuning file {}: version {} is not {}", file.string(), json.value("version", nlohmann::json()).dump(),
         kTuningVersion);
  auto count = [&](const char* field) {
    auto found = json.find(field);
    if (found == json.end() || !found->is_number_unsigned() || found->get<uint64_t>() == 0 ||
        found->get<uint64_t>() > kMaxWorkgroups)
      fail("tuning file {}: field '{}' must be a count from 1 to {}", file.string(), field, kMaxWorkgroups);
    return found->get<uint32_t>();
  };
  Tuning tuning;
  tuning.resident_workgroups = count("resident_workgroups");
  tuning.resident_tiles = count("resident_tiles");
  tuning.probe_seconds = json.value("probe_seconds", 0.0);
  return tuning;
}

const Tuning& retune(gpu::Device& device) {
  Tuning tuning = probe_tuning(device);
  if (std::filesystem::path file = tuning_file(device.adapter()); !file.empty()) {
    try {
      write_tuning(file, device.adapter(), tuning);
    } catch (const Error& error) {
      std::fprintf(stderr, "warning: %s (the tuning is measured again next time)\n", error.what());
    }
  }
  device.set_tuning(tuning);
  return *device.tuning();
}

const Tuning& tuning(const gpu::Device& measured) {
  if (measured.tuning()) return *measured.tuning();
  // The tuning is a property of the adapter that is found out once, at the first question: the dispatchers that ask
  // hold the device as const (they only record), so it is filled in here, as a lazily computed attribute is.
  auto& device = const_cast<gpu::Device&>(measured);
  std::filesystem::path file = tuning_file(device.adapter());
  if (!file.empty() && std::filesystem::exists(file)) {
    try {
      device.set_tuning(read_tuning(file));
      return *device.tuning();
    } catch (const Error& error) {
      std::fprintf(stderr, "warning: %s; measuring the adapter again\n", error.what());
    }
  }
  return retune(device);
}

}  // namespace gerbil::kernels
