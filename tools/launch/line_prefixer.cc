#include "tools/launch/line_prefixer.h"

namespace cohort::launch {

void LinePrefixer::Feed(absl::string_view bytes, std::string* out,
                        std::vector<std::string>* control) {
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    if (newline == absl::string_view::npos) {
      partial_.append(bytes.data(), bytes.size());
      if (partial_.size() >= kMaxLineBytes) Flush(out);
      return;
    }
    const char first = partial_.empty() ? bytes.front() : partial_.front();
    if (control != nullptr && first == kControl) {
      partial_.append(bytes.data(), newline);
      control->push_back(partial_.substr(1));
    } else {
      out->append(prefix_);
      out->append(partial_);
      out->append(bytes.data(), newline + 1);
    }
    partial_.clear();
    bytes.remove_prefix(newline + 1);
  }
}

void LinePrefixer::Flush(std::string* out) {
  if (partial_.empty()) return;
  out->append(prefix_);
  out->append(partial_);
  out->push_back('\n');
  partial_.clear();
}

}  // namespace cohort::launch
