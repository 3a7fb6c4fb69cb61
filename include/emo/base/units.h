// Physical quantities as types (STYLE §4). Time is int64 nanoseconds everywhere, converted
// once at the reader; other quantities are doubles in SI-ish units named by the type.
#pragma once

#include <cstdint>
#include <compare>

namespace emo {

// A value of one physical unit. Same-unit arithmetic only; scaling by a plain number.
template <typename Tag, typename Rep>
class Quantity {
 public:
  using rep = Rep;
  constexpr Quantity() = default;
  constexpr explicit Quantity(Rep v) : v_(v) {}
  constexpr Rep value() const { return v_; }

  constexpr Quantity operator+(Quantity o) const { return Quantity(v_ + o.v_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(v_ - o.v_); }
  constexpr Quantity& operator+=(Quantity o) { v_ += o.v_; return *this; }
  constexpr Quantity& operator-=(Quantity o) { v_ -= o.v_; return *this; }
  constexpr Quantity operator-() const { return Quantity(-v_); }
  constexpr auto operator<=>(const Quantity&) const = default;

 private:
  Rep v_{};
};

struct NanosecondsTag {};
struct WattsTag {};
struct JoulesTag {};
struct MegaHertzTag {};

using Nanoseconds = Quantity<NanosecondsTag, int64_t>;
using Watts = Quantity<WattsTag, double>;
using Joules = Quantity<JoulesTag, double>;
using MegaHertz = Quantity<MegaHertzTag, double>;

// Raw nanosecond count, the storage type of columnar tables (a column of Nanoseconds would
// be the same bytes; the alias documents the unit where the raw value is needed).
using TimeNs = int64_t;

constexpr double NsToUs(TimeNs ns) { return static_cast<double>(ns) / 1e3; }
constexpr double NsToMs(TimeNs ns) { return static_cast<double>(ns) / 1e6; }
constexpr double NsToS(TimeNs ns) { return static_cast<double>(ns) / 1e9; }

constexpr Joules operator*(Watts p, Nanoseconds t) {
  return Joules(p.value() * static_cast<double>(t.value()) * 1e-9);
}

}  // namespace emo
