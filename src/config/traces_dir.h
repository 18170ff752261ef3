// Where the public traces live, in this order: $GPUPOOL_TRACES when set;
// ../shared/traces beside the checkout (relative to the working directory,
// or to its parent); when `near` names a folder inside the checkout (a
// scenario file's folder), <near>/../../../shared/traces; and last the
// cache scripts/fetch-traces.sh fills ($XDG_CACHE_HOME/gpupool/traces, else
// ~/.cache/gpupool/traces).
// Traces are never part of the repository; whatever reads one must cope with
// it being absent and say so with MissingTrace's text.
#pragma once

#include <string>
#include <string_view>

namespace gpupool {

// The traces folder, or "" when none is found.
std::string TracesDir(const std::string& near = "");

// TracesDir() + "/" + relative, or "" when the file is not there.
std::string TraceFile(const std::string& relative);

// The cache folder fetch-traces.sh fills by default ("" without $HOME).
std::string TracesCacheDir();

// Why a command cannot go on without the trace file `relative` (a path
// under the traces folder): which file, where it was looked for, and the
// one command that fetches it. E.g. "philly-runtime/philly_runtime.csv is
// not here (looked in ...): fetch the public traces with
// scripts/fetch-traces.sh".
std::string MissingTrace(std::string_view relative);

// The same for a file given by its path (a scenario's trace_nodes or pods,
// `sim fgd --nodes`): the path, where the traces folder is looked for when
// the path lies in one (TracesDir(), the cache, or a folder named
// "traces", one subfolder down), and the fetch command.
std::string MissingTraceFile(const std::string& path);

}  // namespace gpupool
