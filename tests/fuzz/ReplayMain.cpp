// A main() for the fuzz targets outside libFuzzer: runs LLVMFuzzerTestOneInput on each file
// named (a folder: on every file in it, sorted), so the normal test suite replays every
// finding kept under tests/fuzz/regressions/ with any compiler. A harness that aborts fails
// the test; the file being run is printed first, so the log names the culprit.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    fs::path p(argv[i]);
    if (fs::is_directory(p)) {
      for (const fs::directory_entry &e : fs::directory_iterator(p))
        if (e.is_regular_file())
          files.push_back(e.path());
    } else if (fs::exists(p)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "%s: no such file or folder\n", argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  for (const fs::path &f : files) {
    std::printf("replaying %s\n", f.c_str());
    std::fflush(stdout);
    std::ifstream in(f, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  }
  std::printf("%zu inputs replayed, none crashed\n", files.size());
  return 0;
}
