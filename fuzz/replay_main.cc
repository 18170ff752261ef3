// The fuzz targets without libFuzzer, for make test (tests/fuzz_replay_test.sh):
// runs one target over every file of its seed corpus (which keeps every input
// a fuzzer ever found), then over seeded mutations of those files (bit flips,
// interesting bytes, cuts, repeats, splices), for at most --mutations inputs
// or --seconds, whichever ends first. A target reports a broken contract by
// aborting, and an input that runs over --timeout-s seconds kills the run;
// either way the input that did it is written to --crash-dir (when given) and
// the exit status is non-zero.
//
//   gpupool_fuzz_replay --target NAME [--mutations N] [--seconds S]
//                       [--seed K] [--timeout-s T] [--crash-dir DIR] SEED_DIR...
//
// The clang build (scripts/fuzz.sh) is the real fuzzer: coverage-guided and
// under AddressSanitizer. This is what fits make test's time: every found
// input stays a regression test, and the mutations check that the targets
// still run.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#define GP_FUZZ_TARGET(name) extern "C" int Fuzz_##name(const uint8_t* data, size_t size);
#include "fuzz_targets.inc"
#undef GP_FUZZ_TARGET

namespace {

using FuzzFn = int (*)(const uint8_t*, size_t);
struct Target {
  const char* name;
  FuzzFn fn;
};
constexpr Target kTargets[] = {
#define GP_FUZZ_TARGET(name) {#name, &Fuzz_##name},
#include "fuzz_targets.inc"
#undef GP_FUZZ_TARGET
};

constexpr size_t kMaxInputBytes = 1 << 20;  // as scripts/fuzz.sh's -max_len, with room for the seeds

struct Options {
  std::string target;
  int64_t mutations = 20000;
  double seconds = 10;
  uint64_t seed = 22;
  unsigned timeout_s = 10;
  std::string crash_dir;
  std::vector<std::string> seed_dirs;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr, "gpupool_fuzz_replay: %s\n", why.c_str());
  std::fprintf(stderr, "usage: gpupool_fuzz_replay --target NAME [--mutations N] [--seconds S] [--seed K] "
                       "[--timeout-s T] [--crash-dir DIR] SEED_DIR...\n");
  std::exit(2);
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--target") o.target = value();
      else if (a == "--mutations") o.mutations = std::stoll(value());
      else if (a == "--seconds") o.seconds = std::stod(value());
      else if (a == "--seed") o.seed = std::stoull(value());
      else if (a == "--timeout-s") o.timeout_s = static_cast<unsigned>(std::stoul(value()));
      else if (a == "--crash-dir") o.crash_dir = value();
      else if (a.starts_with("--")) Usage("unknown flag " + a);
      else o.seed_dirs.push_back(a);
    } catch (const std::exception&) {
      Usage(a + ": not a number: " + argv[i]);
    }
  }
  if (o.target.empty()) Usage("--target is required");
  if (o.mutations < 0 || o.seconds < 0 || o.timeout_s == 0) Usage("--mutations, --seconds, --timeout-s: out of range");
  return o;
}

// splitmix64: small, seeded, the same on every machine.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }
};

std::vector<std::string> ReadSeeds(const std::vector<std::string>& dirs) {
  std::vector<std::filesystem::path> files;
  for (const std::string& d : dirs) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(d, ec)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    if (ec) Usage(d + ": cannot list: " + ec.message());
  }
  std::sort(files.begin(), files.end());  // the same order everywhere, so a seed replays
  std::vector<std::string> out;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    out.push_back(text.str().substr(0, kMaxInputBytes));
  }
  return out;
}

void Mutate(std::string& s, const std::vector<std::string>& seeds, Rng& rng) {
  static constexpr char kInteresting[] = {'\0', '\xff', '\x7f', '\x80', '"', '{', '[', ':', ',', '\n', '-', '9'};
  const int steps = 1 + static_cast<int>(rng.Below(4));
  for (int k = 0; k < steps; ++k) {
    switch (rng.Below(6)) {
      case 0:  // flip a bit
        if (!s.empty()) s[rng.Below(s.size())] ^= static_cast<char>(1 << rng.Below(8));
        break;
      case 1:  // an interesting byte
        if (!s.empty()) s[rng.Below(s.size())] = kInteresting[rng.Below(sizeof kInteresting)];
        break;
      case 2:  // cut a range
        if (!s.empty()) {
          const size_t at = rng.Below(s.size());
          s.erase(at, rng.Below(std::min<size_t>(s.size() - at, 64) + 1));
        }
        break;
      case 3:  // repeat a range
        if (!s.empty() && s.size() < kMaxInputBytes / 2) {
          const size_t at = rng.Below(s.size());
          s.insert(rng.Below(s.size() + 1), s.substr(at, rng.Below(64) + 1));
        }
        break;
      case 4:  // truncate
        s.resize(rng.Below(s.size() + 1));
        break;
      default:  // splice the head of another seed
        if (!seeds.empty()) {
          const std::string& other = seeds[rng.Below(seeds.size())];
          s = s.substr(0, rng.Below(s.size() + 1)) + other.substr(rng.Below(other.size() + 1));
        }
    }
  }
}

// The input running now, for the handlers below (set before each run).
std::string g_current;
std::string g_crash_path;

void WriteCrash() {
  if (g_crash_path.empty()) return;
  std::ofstream(g_crash_path, std::ios::binary) << g_current;
}

void OnFatal(int sig) {
  const char* what = sig == SIGALRM ? "timeout: an input ran over --timeout-s\n" : "the target crashed or aborted\n";
  (void)!write(2, what, std::strlen(what));
  WriteCrash();
  std::signal(sig, SIG_DFL);
  std::raise(sig == SIGALRM ? SIGABRT : sig);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  const auto t = std::find_if(std::begin(kTargets), std::end(kTargets),
                              [&](const Target& k) { return o.target == k.name; });
  if (t == std::end(kTargets)) Usage("--target " + o.target + ": no such target");
  const std::vector<std::string> seeds = ReadSeeds(o.seed_dirs);
  if (!o.crash_dir.empty()) g_crash_path = o.crash_dir + "/" + o.target + "-crash";
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGALRM}) std::signal(sig, OnFatal);

  const auto start = std::chrono::steady_clock::now();
  auto run = [&](const std::string& input) {
    g_current = input;
    alarm(o.timeout_s);
    t->fn(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    alarm(0);
  };
  for (const std::string& s : seeds) run(s);
  Rng rng{o.seed};
  int64_t mutated = 0;
  const std::vector<std::string> base = seeds.empty() ? std::vector<std::string>{std::string()} : seeds;
  while (mutated < o.mutations &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < o.seconds) {
    std::string input = base[rng.Below(base.size())];
    Mutate(input, seeds, rng);
    run(input);
    ++mutated;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%-22s seeds %5zu  mutations %8lld  %.1f s  clean\n", o.target.c_str(), seeds.size(),
              static_cast<long long>(mutated), s);
  return 0;
}
