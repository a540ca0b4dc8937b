// gerbil info: what WebGPU adapter gerbil runs on, with its features and the limits that matter here; with
// --model FILE.gguf, what the file holds instead.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "command.h"
#include "gerbil/error.h"
#include "gpu/device.h"
#include "model/gguf.h"
#include "model/gguf_model.h"

namespace gerbil::cli {
namespace {

nlohmann::json describe(const gpu::Device& device) {
  const auto& a = device.adapter();
  const auto& l = device.limits();
  const auto& f = device.features();
  return {
      {"adapter",
       {{"vendor", a.vendor}, {"architecture", a.architecture}, {"device", a.device}, {"description", a.description},
        {"backend", a.backend}, {"adapter_type", a.adapter_type}, {"vendor_id", a.vendor_id},
        {"device_id", a.device_id}, {"subgroup_min_size", a.subgroup_min_size},
        {"subgroup_max_size", a.subgroup_max_size}}},
      {"features",
       {{"shader-f16", f.shader_f16}, {"subgroups", f.subgroups}, {"timestamp-query", f.timestamp_query},
        {"chromium-experimental-subgroup-matrix", f.subgroup_matrix}}},
      {"limits",
       {{"maxBufferSize", l.maxBufferSize}, {"maxStorageBufferBindingSize", l.maxStorageBufferBindingSize},
        {"maxUniformBufferBindingSize", l.maxUniformBufferBindingSize},
        {"maxStorageBuffersPerShaderStage", l.maxStorageBuffersPerShaderStage},
        {"maxComputeWorkgroupStorageSize", l.maxComputeWorkgroupStorageSize},
        {"maxComputeInvocationsPerWorkgroup", l.maxComputeInvocationsPerWorkgroup},
        {"maxComputeWorkgroupSizeX", l.maxComputeWorkgroupSizeX},
        {"maxComputeWorkgroupsPerDimension", l.maxComputeWorkgroupsPerDimension},
        {"minStorageBufferOffsetAlignment", l.minStorageBufferOffsetAlignment}}},
  };
}

void print_text(const nlohmann::json& info) {
  const auto& a = info["adapter"];
  std::printf("adapter:      %s\n", a["device"].get<std::string>().c_str());
  std::printf("vendor:       %s (0x%04x)\n", a["vendor"].get<std::string>().c_str(), a["vendor_id"].get<unsigned>());
  std::printf("architecture: %s\n", a["architecture"].get<std::string>().c_str());
  std::printf("description:  %s\n", a["description"].get<std::string>().c_str());
  std::printf("backend:      %s\n", a["backend"].get<std::string>().c_str());
  std::printf("type:         %s\n", a["adapter_type"].get<std::string>().c_str());
  std::printf("subgroups:    %u..%u\n", a["subgroup_min_size"].get<unsigned>(), a["subgroup_max_size"].get<unsigned>());
  std::printf("features:    ");
  for (auto& [name, on] : info["features"].items()) std::printf(" %s%s", on.get<bool>() ? "" : "!", name.c_str());
  std::printf("\nlimits:\n");
  for (auto& [name, value] : info["limits"].items())
    std::printf("  %-36s %s\n", name.c_str(), value.dump().c_str());
}

// What a GGUF file holds: architecture, parameters, context, quantization mix, template, tokenizer.
void print_gguf(const nlohmann::json& summary) {
  for (auto& [key, value] : summary.items())
    std::printf("%-22s %s\n", (key + ":").c_str(), value.is_string() ? value.get<std::string>().c_str() : value.dump().c_str());
}

GERBIL_COMMAND("info", "Show the WebGPU adapter, its features and limits (or what a GGUF file holds)", [](CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto adapter = std::make_shared<std::string>();
  auto model = std::make_shared<std::string>();
  app.add_flag("--json", *json, "Print JSON");
  app.add_option("--adapter", *adapter, "Adapter to use (substring of its name; default: $GERBIL_ADAPTER)");
  app.add_option("--model", *model, "A GGUF file: print what it holds (no device is opened)");
  return [json, adapter, model] {
    if (!model->empty()) {
      if (!std::filesystem::exists(*model)) fail("info --model: {} does not exist", *model);
      if (!is_gguf_file(*model)) fail("info --model: {} is not a GGUF file", *model);
      nlohmann::json summary = gguf_summary(Gguf::open(*model));
      if (*json)
        std::printf("%s\n", summary.dump(2).c_str());
      else
        print_gguf(summary);
      return 0;
    }
    gpu::Device device({.adapter = *adapter});
    auto info = describe(device);
    if (*json)
      std::printf("%s\n", info.dump(2).c_str());
    else
      print_text(info);
    return 0;
  };
});

}  // namespace
}  // namespace gerbil::cli
