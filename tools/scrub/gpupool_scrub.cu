// gpupool-scrub: zeroes the free memory of one GPU or MIG instance (RECLAIM-4),
// so that the next tenant cannot read what the previous one left behind.
//
// The agent (src/agent/nvml_backend.cc) runs it with CUDA_VISIBLE_DEVICES set
// to one GPU or MIG UUID; the tool works on CUDA device 0 of what that shows.
// It allocates the free memory in large chunks (halving the chunk size when an
// allocation fails, down to a floor), zeroes every chunk with cudaMemsetAsync,
// waits, frees, and prints one JSON line on stdout:
//   {"bytes":N,"seconds":S,"wall_seconds":W,"gbps":G,"device":"NAME","free_bytes":F}
// where `seconds` is the GPU time of the memsets (CUDA events), `wall_seconds`
// the host time of the same span, `gbps` = bytes / seconds / 1e9, and
// `free_bytes` what cudaMemGetInfo reported before. Errors go to stderr, with a
// non-zero exit status.
//
// What is not zeroed: the headroom left to the driver (--headroom-mib, 64 MiB
// by default: CUDA needs some for its own bookkeeping while the memsets run)
// and a remainder below the chunk floor (2 MiB). Memory held by running
// processes is not free and is not touched.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kFirstChunk = size_t{4} << 30;  // 4 GiB
constexpr size_t kChunkFloor = 2 * kMiB;
constexpr size_t kVerifySample = 4096;  // bytes read back at each sampled offset
constexpr int kVerifyOffsets = 16;      // sampled offsets per chunk (plus the last bytes)

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: gpupool-scrub [--verify] [--headroom-mib N]\n"
               "Zeroes the free memory of CUDA device 0 (set CUDA_VISIBLE_DEVICES to one GPU or MIG UUID)\n"
               "and prints {\"bytes\":N,\"seconds\":S,\"wall_seconds\":W,\"gbps\":G,\"device\":\"NAME\",...}.\n"
               "  --verify          fill each chunk first, then read samples back after zeroing and check them\n"
               "  --headroom-mib N  leave N MiB free for the driver (default 64)\n"
               "  --help            this text\n");
}

// Fails the tool with the CUDA error of `what`.
bool Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "gpupool-scrub: %s: %s (%s)\n", what, cudaGetErrorString(e), cudaGetErrorName(e));
  return false;
}

std::string JsonString(const char* s) {
  std::string out = "\"";
  for (const char* p = s; *p; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

struct Chunk {
  void* ptr = nullptr;
  size_t bytes = 0;
};

void FreeAll(std::vector<Chunk>& chunks) {
  for (auto& c : chunks) cudaFree(c.ptr);
  chunks.clear();
}

// Allocates up to `target` bytes in chunks of at most kFirstChunk, halving
// the chunk size whenever an allocation fails.
std::vector<Chunk> AllocateFree(size_t target) {
  std::vector<Chunk> chunks;
  size_t left = target;
  size_t chunk = kFirstChunk;
  while (left >= kChunkFloor) {
    size_t want = chunk < left ? chunk : left;
    want -= want % kChunkFloor;  // whole 2 MiB pages
    if (want < kChunkFloor) break;
    void* p = nullptr;
    if (cudaMalloc(&p, want) == cudaSuccess) {
      chunks.push_back({p, want});
      left -= want;
      continue;
    }
    cudaGetLastError();  // clear the allocation error
    chunk = want / 2;
    if (chunk < kChunkFloor) break;
  }
  return chunks;
}

bool Verify(const std::vector<Chunk>& chunks) {
  std::vector<unsigned char> host(kVerifySample);
  for (const auto& c : chunks) {
    for (int k = 0; k <= kVerifyOffsets; ++k) {
      const size_t n = c.bytes < kVerifySample ? c.bytes : kVerifySample;
      // k < kVerifyOffsets: evenly spaced; k == kVerifyOffsets: the last bytes.
      size_t offset = k < kVerifyOffsets ? (c.bytes - n) / kVerifyOffsets * k : c.bytes - n;
      if (!Check(cudaMemcpy(host.data(), static_cast<char*>(c.ptr) + offset, n, cudaMemcpyDeviceToHost),
                 "cudaMemcpy (verify)")) {
        return false;
      }
      for (size_t i = 0; i < n; ++i) {
        if (host[i] != 0) {
          std::fprintf(stderr, "gpupool-scrub: verify: byte %zu of a %zu-byte chunk is 0x%02x, not zero\n",
                       offset + i, c.bytes, host[i]);
          return false;
        }
      }
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool verify = false;
  size_t headroom = 64 * kMiB;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      Usage(stdout);
      return 0;
    } else if (a == "--verify") {
      verify = true;
    } else if (a == "--headroom-mib" && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long long mib = std::strtoull(argv[++i], &end, 10);
      if (!end || *end != '\0' || argv[i][0] == '\0') {
        std::fprintf(stderr, "gpupool-scrub: --headroom-mib takes a whole number, not '%s'\n", argv[i]);
        return 2;
      }
      headroom = static_cast<size_t>(mib) * kMiB;
    } else {
      std::fprintf(stderr, "gpupool-scrub: unknown argument '%s'\n", a.c_str());
      Usage(stderr);
      return 2;
    }
  }

  int count = 0;
  const cudaError_t count_error = cudaGetDeviceCount(&count);
  if (count_error != cudaSuccess || count == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    std::fprintf(stderr, "gpupool-scrub: no CUDA device visible (CUDA_VISIBLE_DEVICES=%s): %s\n",
                 visible ? visible : "<unset>",
                 count_error != cudaSuccess ? cudaGetErrorString(count_error) : "none found");
    return 1;
  }
  if (!Check(cudaSetDevice(0), "cudaSetDevice(0)")) return 1;
  cudaDeviceProp prop{};
  if (!Check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties")) return 1;
  if (!Check(cudaFree(nullptr), "creating the CUDA context")) return 1;
  size_t free_bytes = 0, total_bytes = 0;
  if (!Check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo")) return 1;

  std::vector<Chunk> chunks = AllocateFree(free_bytes > headroom ? free_bytes - headroom : 0);
  size_t bytes = 0;
  for (const auto& c : chunks) bytes += c.bytes;

  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  bool ok = Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate") &&
            Check(cudaEventCreate(&start), "cudaEventCreate") && Check(cudaEventCreate(&stop), "cudaEventCreate");
  if (ok && verify) {  // so that the check below shows the memsets ran, not that memory was already zero
    for (const auto& c : chunks) {
      ok = ok && Check(cudaMemsetAsync(c.ptr, 0xA5, c.bytes, stream), "cudaMemsetAsync (fill)");
    }
    ok = ok && Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (fill)");
  }
  float gpu_ms = 0;
  double wall_s = 0;
  if (ok) {
    const auto wall_start = std::chrono::steady_clock::now();
    ok = Check(cudaEventRecord(start, stream), "cudaEventRecord");
    for (const auto& c : chunks) ok = ok && Check(cudaMemsetAsync(c.ptr, 0, c.bytes, stream), "cudaMemsetAsync");
    ok = ok && Check(cudaEventRecord(stop, stream), "cudaEventRecord") &&
         Check(cudaEventSynchronize(stop), "cudaEventSynchronize") &&
         Check(cudaEventElapsedTime(&gpu_ms, start, stop), "cudaEventElapsedTime");
    wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  }
  if (ok && verify) ok = Verify(chunks);
  FreeAll(chunks);
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  if (stream) cudaStreamDestroy(stream);
  if (!ok) return 1;
  if (bytes == 0 && free_bytes > headroom + kChunkFloor) {
    std::fprintf(stderr, "gpupool-scrub: could not allocate any of the %zu free bytes\n", free_bytes);
    return 1;
  }

  const double seconds = gpu_ms / 1000.0;
  const double gbps = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  std::printf("{\"bytes\":%zu,\"seconds\":%.6f,\"wall_seconds\":%.6f,\"gbps\":%.1f,\"device\":%s,\"free_bytes\":%zu}\n",
              bytes, seconds, wall_s, gbps, JsonString(prop.name).c_str(), free_bytes);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
