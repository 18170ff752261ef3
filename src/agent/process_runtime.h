// The `process` task runtime: each replica is a plain child process of the
// agent in its own session (ChildProcess, executor.h), with the agent's
// user and the whole node in view. Used only where no OCI runtime works or
// `--runtime process` is given; the agent then registers with isolation
// "none" and warns at start-up.
//
// A restarted agent cannot re-adopt plain processes: Recover kills the
// process groups its predecessor left (WORK/tasks.pids: pid and start time,
// so a reused pid is left alone; nothing from before a reboot) and waits
// for them to go, and the tasks start again from their checkpoints.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "src/agent/task_runtime.h"

namespace gpupool {

// `log` records each leftover group it kills (pid).
std::unique_ptr<TaskRuntime> MakeProcessRuntime(std::string work_dir, std::function<void(int pid)> log);

}  // namespace gpupool
