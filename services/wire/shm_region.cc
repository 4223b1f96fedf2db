#include "services/wire/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cohort {

absl::StatusOr<std::shared_ptr<ShmRegion>> ShmRegion::Create(size_t bytes,
                                                             absl::string_view what) {
  const int fd = memfd_create("cohort-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", what, "'s memfd"));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("cannot size ", what, " to ", bytes,
                                                 " bytes (is /dev/shm's memory limited?)"));
  }
  void* mapping = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("cannot map ", what));
  }
  return std::shared_ptr<ShmRegion>(new ShmRegion(fd, static_cast<char*>(mapping), bytes));
}

absl::StatusOr<std::shared_ptr<ShmRegion>> ShmRegion::Attach(int fd, absl::string_view what) {
  const int seals = fcntl(fd, F_GET_SEALS);
  struct stat st;
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW) ||
      fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        "the descriptor passed as ", what, " is not a memfd sealed at its size"));
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* mapping = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("cannot map ", what, " of ", bytes, " bytes"));
  }
  return std::shared_ptr<ShmRegion>(new ShmRegion(fd, static_cast<char*>(mapping), bytes));
}

ShmRegion::~ShmRegion() {
  munmap(data_, size_);
  close(fd_);
}

}  // namespace cohort
