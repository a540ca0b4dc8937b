// fuzz-link: gerbil_model
// The safetensors reader on one whole file: the 8-byte header length, the JSON header (dtypes, shapes,
// data_offsets, __metadata__) and the checks of the offsets against the data that follows.
#include "fuzz_support.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = gerbil::fuzz::write_temp_file("model.safetensors", gerbil::fuzz::as_text(data, size));
  return gerbil::fuzz::expect_clean_rejection([&] {
    gerbil::Safetensors tensors = gerbil::Safetensors::open(file);
    for (const auto& [name, view] : tensors.tensors()) (void)view.numel();
    (void)tensors.total_bytes();
  });
}
