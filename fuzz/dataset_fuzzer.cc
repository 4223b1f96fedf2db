// The dataset readers: IDX (MNIST, Fashion-MNIST) of 1 to 3 dimensions (the first byte says
// which) and CIFAR-10 batch files.

#include <cstdint>

#include "absl/types/span.h"
#include "trainer/data/cifar.h"
#include "trainer/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int rank = 1 + data[0] % 3;
  const absl::Span<const uint8_t> bytes(data + 1, size - 1);
  cohort::DecodeIdx(bytes, rank, "fuzz input").IgnoreError();
  cohort::ImageDataset cifar;
  cohort::AppendCifar10Records(bytes, "fuzz input", &cifar).IgnoreError();
  return 0;
}
