#include "services/scheduler/job_page.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace cohort {

extern const char kJobPageHtml[];  // job_page.html, made by the BUILD's genrule

namespace {

constexpr char kDataSlot[] = "/*COHORT_DATA*/null";

}  // namespace

const std::string& JobPageHtml() {
  static const std::string* const page = new std::string(kJobPageHtml);
  return *page;
}

std::string JobReportHtml(const std::string& status_json, const std::string& history_json) {
  // '<' only occurs inside the JSON's strings, where \u003c reads the same: no text of a member
  // can close the script ("</script>") or open a comment.
  const std::string data = absl::StrReplaceAll(
      absl::StrCat("{\"status\":", status_json, ",\"history\":", history_json, "}"),
      {{"<", "\\u003c"}});
  return absl::StrReplaceAll(JobPageHtml(), {{kDataSlot, data}});
}

}  // namespace cohort
