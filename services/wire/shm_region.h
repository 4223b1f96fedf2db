#ifndef COHORT_SERVICES_WIRE_SHM_REGION_H_
#define COHORT_SERVICES_WIRE_SHM_REGION_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

// Memory two processes of one host map: a memfd sealed at its size, made by one and passed to
// the other, where one writes what the other reads in place (a ring's, shm_ring.h; an update
// pool, shm_backup_link.h). The seals keep either process from shrinking it under the other's
// mapping (a SIGBUS there) or growing it.
class ShmRegion {
 public:
  // `what` names it in errors ("a shared-memory ring").
  static absl::StatusOr<std::shared_ptr<ShmRegion>> Create(size_t bytes, absl::string_view what);
  // Maps the memfd another process made (and closes `fd` if it cannot); refused unless sealed
  // at its size.
  static absl::StatusOr<std::shared_ptr<ShmRegion>> Attach(int fd, absl::string_view what);
  ~ShmRegion();
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }
  // The memfd, to pass to the other process (still owned here).
  int fd() const { return fd_; }

 private:
  ShmRegion(int fd, char* data, size_t size) : fd_(fd), data_(data), size_(size) {}
  const int fd_;
  char* const data_;
  const size_t size_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_SHM_REGION_H_
