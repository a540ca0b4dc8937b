// The WGSL source of every kernel in src/kernels/wgsl/, embedded at build time (cmake/EmbedWgsl.cmake),
// keyed by file name without extension ("matmul", "rmsnorm", ...).
#pragma once

#include <map>
#include <string_view>

namespace gerbil::kernels {

const std::map<std::string_view, std::string_view>& wgsl_sources();

}  // namespace gerbil::kernels
