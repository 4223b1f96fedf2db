#ifndef COHORT_SERVICES_TESTING_DELAYING_TRANSPORT_H_
#define COHORT_SERVICES_TESTING_DELAYING_TRANSPORT_H_

#include <cstdint>
#include <memory>

#include "services/worker/shard_transport.h"

namespace cohort {

// For tests of order independence: a worker's transport that holds each part's push back up
// to 3 ms on one rank of num_workers, picked at random per (seed, version, key, part), so parts
// reach the shards in orders that differ from seed to seed. Everything else passes through.
std::unique_ptr<ShardTransport> MakeDelayingTransport(std::unique_ptr<ShardTransport> inner,
                                                      uint64_t seed, int num_workers);

}  // namespace cohort

#endif  // COHORT_SERVICES_TESTING_DELAYING_TRANSPORT_H_
