// Where the files installed with the gpupool binary are. In a build tree they
// sit beside it (build/gpupool-shim, build/libgpupool-cuda-cap.so); a package
// puts helpers in PREFIX/lib/gpupool and data in PREFIX/share/gpupool, with
// the binary in PREFIX/bin (packaging/, cmake/packaging.cmake).
#pragma once

#include <string>
#include <string_view>

namespace gpupool {

// The folder of the running executable (/proc/self/exe), or "" when it
// cannot be read.
std::string ExecutableDir();

// The first of these that exists and is readable (and executable when
// `executable`): EXE_DIR/name, EXE_DIR/../name, EXE_DIR/../lib/gpupool/name,
// /usr/lib/gpupool/name. "" when none is.
std::string FindHelper(std::string_view name, bool executable);

// A data folder shipped with gpupool (e.g. "scenarios"): `name` relative to
// the working directory when it is a folder there, else
// EXE_DIR/../share/gpupool/name, else /usr/share/gpupool/name when those are
// folders; else `name` unchanged (so that an error names what was looked for).
std::string FindDataDir(std::string_view name);

}  // namespace gpupool
