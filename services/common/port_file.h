#ifndef COHORT_SERVICES_COMMON_PORT_FILE_H_
#define COHORT_SERVICES_COMMON_PORT_FILE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace cohort {

// Port files (Contracts, "Ports"): a service writes the port it got as one decimal line,
// atomically; whoever started it reads it back.
absl::Status WritePortFile(const std::string& path, int port);
// nullopt while the file is not there; an error naming the file when it holds no port number.
absl::StatusOr<std::optional<int>> ReadPortFile(const std::string& path);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_PORT_FILE_H_
