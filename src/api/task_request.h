// The task fields of a job request (OPS-1): what each replica runs on its
// node. Read by ParseJobRequest, written back by JobSpecToRequest.
//
//   command: ["python", "train.py"]   argv; command[0] looked up on PATH
//   env: {"NAME": "value"}            names [A-Za-z_][A-Za-z0-9_]*; CUDA_* and
//                                     GPUPOOL_* are set by the agent
//   working_dir: "/abs/path"          empty: the agent's directory for the task
//   checkpoint_signal: "SIGUSR1"      asks a checkpointable task to checkpoint
//   checkpoint_timeout: "60s"         how long the agent waits for its acknowledgement
//   stop_grace: "10s"                 SIGTERM, then SIGKILL after this
//   image: "host"                     the container's root file system: "host"
//                                     (a read-only view of the node's) or an
//                                     absolute path on the node (an OCI image
//                                     layout or an unpacked rootfs); absent:
//                                     the server's default_image (applied by
//                                     ParseJobRequest, not here)
//   shm_gib: 1                        size of /dev/shm, > 0 and <= 64 (stored
//                                     as TaskSpec::shm_mib)
//   network: "host"                   "host" (the node's network) or
//                                     "isolated" (a namespace of its own)
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "src/api/json_fields.h"
#include "src/model/job.h"

namespace gpupool {

// The keys ParseTaskFields reads.
inline constexpr std::string_view kTaskKeys[] = {"command",    "env",        "working_dir", "checkpoint_signal",
                                                 "checkpoint_timeout", "stop_grace", "image", "shm_gib",
                                                 "network"};
inline constexpr int64_t kDefaultShmMib = 1024;  // TaskSpec::shm_mib's default
inline constexpr double kMaxShmGib = 64;

// Reads the task keys of a job request into `task`. Returns false after
// setting *err (naming the field) on a bad value; keys other than command
// require a command.
bool ParseTaskFields(const FieldReader& f, TaskSpec& task, ApiError* err);
// The same keys as a request would give them (nothing when task is empty;
// image only when given, shm_gib and network only when not the default).
void TaskToRequest(const TaskSpec& task, nlohmann::json& request);

// What is wrong with `image` as a job's image or the server's default_image
// ("host", or an absolute path without NUL of at most 4096 bytes); empty
// when nothing is.
std::string ImageProblem(std::string_view image);

// "SIGUSR1" (or "USR1") -> 10, for the signals a task may be asked with.
std::optional<int> SignalFromName(std::string_view name);
std::string SignalName(int signal);

}  // namespace gpupool
