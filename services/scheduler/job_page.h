#ifndef COHORT_SERVICES_SCHEDULER_JOB_PAGE_H_
#define COHORT_SERVICES_SCHEDULER_JOB_PAGE_H_

#include <string>

namespace cohort {

// The job page (job_page.html), one self-contained HTML file: the job's state, progress and
// ETA, plots of images/sec, loss, test accuracy and Comm% over time, the members and what
// happened. Served at "/", it reads /status and /history beside it every 2 s (with the job's
// token from "#token=..." or a form, kept for the browser tab).
const std::string& JobPageHtml();

// The same page with the job's last /status and /history inside it: what the scheduler writes
// when the job ends (--report_file), to be opened later without a scheduler.
std::string JobReportHtml(const std::string& status_json, const std::string& history_json);

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_JOB_PAGE_H_
