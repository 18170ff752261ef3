#include "tests/agent_process.h"

#include "tests/run_binary.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpupool::testing {

AgentProcess::AgentProcess(std::string server_url, std::string token_file, std::string node, std::string work_dir,
                           std::vector<std::string> extra_args)
    : work_dir_(std::move(work_dir)) {
  args_ = {GPUPOOL_BINARY, "agent", "--server", server_url, "--token-file", token_file, "--node", node,
           "--work-dir", work_dir_};
  args_.insert(args_.end(), extra_args.begin(), extra_args.end());
}

AgentProcess::~AgentProcess() { Stop(); }

void AgentProcess::Start() {
  std::filesystem::create_directories(work_dir_);
  const std::string log = work_dir_ + "/stderr.log";
  pid_ = fork();
  if (pid_ == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args_) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
}

void AgentProcess::Kill() { KillChild(pid_); }
int AgentProcess::Stop() { return StopChild(pid_); }

std::string AgentProcess::log() const { return ReadTextFile(work_dir_ + "/stderr.log"); }
std::string AgentProcess::action_log() const { return ReadTextFile(work_dir_ + "/agent.log"); }

}  // namespace gpupool::testing
