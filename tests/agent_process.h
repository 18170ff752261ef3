// A real `gpupool agent` in a child process, for end-to-end tests.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace gpupool::testing {

class AgentProcess {
 public:
  // `extra_args` go after --server, --token-file and --node.
  AgentProcess(std::string server_url, std::string token_file, std::string node, std::string work_dir,
               std::vector<std::string> extra_args);
  ~AgentProcess();

  void AddArgs(const std::vector<std::string>& args) { args_.insert(args_.end(), args.begin(), args.end()); }
  void Start();
  void Kill();  // SIGKILL, then reap (its tasks live on, as after a crash)
  int Stop();   // SIGTERM and wait; the exit code
  const std::string& work_dir() const { return work_dir_; }
  std::string log() const;        // its stderr
  std::string action_log() const;  // WORK/agent.log

 private:
  std::vector<std::string> args_;
  std::string work_dir_;
  pid_t pid_ = -1;
};

}  // namespace gpupool::testing
