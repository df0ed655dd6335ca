// Gate activation of a gated MLP, shared by the model config and the backends' fused ops.
#pragma once

#include <cstdint>

namespace specd {

// silu (SwiGLU) or PyTorch's tanh-approximated GELU.
enum class Activation : uint8_t { kSilu, kGeluTanh };

}  // namespace specd
