// Where the public traces live: $GPUPOOL_TRACES when set, else
// ../shared/traces beside the checkout (relative to the working directory,
// or to its parent), else, when `near` names a folder inside the checkout
// (a scenario file's folder), <near>/../../../shared/traces.
// Traces are never part of the repository; whatever reads one must cope with
// it being absent (and say so).
#pragma once

#include <string>

namespace gpupool {

// The traces folder, or "" when none is found.
std::string TracesDir(const std::string& near = "");

// TracesDir() + "/" + relative, or "" when the file is not there.
std::string TraceFile(const std::string& relative);

}  // namespace gpupool
