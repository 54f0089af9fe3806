// Code points of UTF-8 text and the Unicode properties the Hugging Face
// tokenizer components test (general categories from libutf8proc, Unicode
// 15; White_Space as Rust's char::is_whitespace has it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace icefloe::transform::unicode {

/// The code point at `s[*i]`, advancing `*i` past it; -1 (and `*i` past one
/// byte) when the bytes there are not valid UTF-8.
int32_t Next(std::string_view s, size_t* i);
/// Appends `cp` to `out` as UTF-8.
void Append(int32_t cp, std::string* out);
/// Whether every byte of `s` is valid UTF-8.
bool IsValid(std::string_view s);

/// Unicode White_Space (Rust's `char::is_whitespace`, regex `\s`).
bool IsWhiteSpace(int32_t cp);
/// Cc, Cf or Co (the `unicode_categories` crate's `is_other`).
bool IsOther(int32_t cp);
/// Pc, Pd, Ps, Pe, Pi, Pf or Po.
bool IsPunctuation(int32_t cp);
/// Mn.
bool IsMarkNonspacing(int32_t cp);
/// Regex `\w` (Unicode word characters: alphabetic, marks, Nd, Pc, joiners).
bool IsWordCharacter(int32_t cp);

/// Appends the full lowercase mapping of `cp` (Rust's `char::to_lowercase`).
void AppendLowercase(int32_t cp, std::string* out);
/// The canonical decomposition (NFD) of UTF-8 `s` into `out` (appended).
void AppendNfd(std::string_view s, std::string* out);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
/// UTF-8 `s` in normal form `form`, appended to `out`.
void AppendNormalForm(std::string_view s, NormalForm form, std::string* out);

}  // namespace icefloe::transform::unicode
