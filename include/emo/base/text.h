// Small text helpers for what EMO prints to people.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace emo {

// "1 pack", "0 packs", "3 packs": the count, a space and the noun in the number the count
// takes. `plural` is for nouns that do not take an "s" ("switch" → "switches"); empty means
// `singular` + "s". Use it wherever a count is printed next to its noun.
std::string Plural(uint64_t count, std::string_view singular, std::string_view plural = {});

}  // namespace emo
