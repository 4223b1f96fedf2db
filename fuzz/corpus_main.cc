// Runs every file of the folders given through LLVMFuzzerTestOneInput, as libFuzzer replays a
// corpus: a regression test of the inputs a fuzz target was seeded with or once crashed on.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  int inputs = 0;
  for (int i = 1; i < argc; ++i) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(argv[i], error)) {
      std::ifstream in(entry.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++inputs;
    }
    if (error) {
      std::fprintf(stderr, "cannot read the corpus %s: %s\n", argv[i], error.message().c_str());
      return 1;
    }
  }
  if (inputs == 0) {
    std::fprintf(stderr, "no inputs in the corpus folders given\n");
    return 1;
  }
  std::printf("%d inputs ran\n", inputs);
  return 0;
}
