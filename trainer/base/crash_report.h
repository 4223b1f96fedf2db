#ifndef COHORT_TRAINER_BASE_CRASH_REPORT_H_
#define COHORT_TRAINER_BASE_CRASH_REPORT_H_

namespace cohort {

// A process that crashes (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) writes the signal and its
// stack, with function names, to stderr before it dies of that signal as it would have (the
// exit status and any core dump stay): a crash in a job's member is said in the launcher's
// log, where it can be read. A stop (SIGTERM) is no crash and says nothing. argv0: the
// program's path, for the symbols. Call first in main.
void ReportCrashes(const char* argv0);

}  // namespace cohort

#endif  // COHORT_TRAINER_BASE_CRASH_REPORT_H_
