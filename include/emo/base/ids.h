// Dense typed 32-bit ids (STYLE §5): an index into one table, not convertible to another's.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>

namespace emo {

template <typename Tag>
class Id {
 public:
  static constexpr uint32_t kInvalidValue = std::numeric_limits<uint32_t>::max();
  constexpr Id() = default;
  constexpr explicit Id(uint32_t v) : v_(v) {}
  static constexpr Id Invalid() { return Id(); }
  constexpr bool valid() const { return v_ != kInvalidValue; }
  constexpr uint32_t value() const { return v_; }
  constexpr auto operator<=>(const Id&) const = default;

 private:
  uint32_t v_ = kInvalidValue;
};

}  // namespace emo

template <typename Tag>
struct std::hash<emo::Id<Tag>> {
  size_t operator()(emo::Id<Tag> id) const noexcept { return std::hash<uint32_t>()(id.value()); }
};
