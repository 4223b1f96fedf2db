#include "services/common/log_safe.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cohort {

std::string LogSafe(absl::string_view text, size_t max_bytes) {
  const absl::string_view kept = text.substr(0, max_bytes);
  std::string safe;
  safe.reserve(kept.size());
  for (const char c : kept) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '\\': safe += "\\\\"; break;
      case '\n': safe += "\\n"; break;
      case '\r': safe += "\\r"; break;
      case '\t': safe += "\\t"; break;
      default:
        if (byte < 0x20 || byte >= 0x7f) {
          absl::StrAppendFormat(&safe, "\\x%02x", byte);
        } else {
          safe += c;
        }
    }
  }
  if (kept.size() < text.size()) {
    absl::StrAppend(&safe, "...(", text.size(), " bytes)");
  }
  return safe;
}

}  // namespace cohort
