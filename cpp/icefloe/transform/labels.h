// Training labels, as the chat column writes them and pack carries them.
#pragma once

#include <cstdint>

namespace icefloe::transform {

/// The label of a token the model is not trained on (PyTorch's
/// cross_entropy ignore_index).
inline constexpr int32_t kIgnoreLabel = -100;

}  // namespace icefloe::transform
