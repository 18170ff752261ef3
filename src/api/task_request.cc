#include "src/api/task_request.h"

#include <cmath>
#include <csignal>

#include "src/base/time_text.h"

namespace gpupool {
namespace {

using nlohmann::json;

constexpr size_t kMaxArgs = 256;
constexpr size_t kMaxArgBytes = 4096;
constexpr size_t kMaxEnv = 256;
constexpr size_t kMaxEnvValueBytes = 16384;
constexpr size_t kMaxPathBytes = 4096;

struct NamedSignal {
  const char* name;
  int signal;
};
constexpr NamedSignal kSignals[] = {{"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGHUP", SIGHUP},
                                    {"SIGINT", SIGINT},   {"SIGTERM", SIGTERM}, {"SIGQUIT", SIGQUIT},
                                    {"SIGWINCH", SIGWINCH}};

bool ValidEnvName(std::string_view n) {
  if (n.empty() || n.size() > 255 || (n[0] >= '0' && n[0] <= '9')) return false;
  for (char c : n) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

bool NoNul(const std::string& s) { return s.find('\0') == std::string::npos; }

bool TaskDuration(const FieldReader& f, std::string_view key, Duration& out, ApiError* err) {
  Duration d{0};
  if (!f.Has(key)) return true;
  if (!f.DurationText(key, d, err)) return false;
  if (d <= Duration(0) || d > std::chrono::hours(24)) {
    *err = BadField(f.PathOf(key), "must be positive and at most 24h");
    return false;
  }
  out = d;
  return true;
}

}  // namespace

std::string ImageProblem(std::string_view image) {
  if (image == "host") return "";
  if (image.empty() || image[0] != '/' || image.find('\0') != std::string_view::npos ||
      image.size() > kMaxPathBytes) {
    return "expected \"host\" or an absolute path on the node (at most " + std::to_string(kMaxPathBytes) +
           " bytes, without NUL)";
  }
  return "";
}

std::optional<int> SignalFromName(std::string_view name) {
  for (const NamedSignal& s : kSignals) {
    const std::string_view full = s.name;
    if (name == full || name == full.substr(3)) return s.signal;
  }
  return std::nullopt;
}

std::string SignalName(int signal) {
  for (const NamedSignal& s : kSignals) {
    if (s.signal == signal) return s.name;
  }
  return std::to_string(signal);
}

namespace {

// command: argv, 1 to kMaxArgs strings, the program not empty.
bool CommandOf(const FieldReader& f, TaskSpec& task, ApiError* err) {
  if (const json* c = f.Find("command")) {
    if (!c->is_array()) {
      *err = BadField(f.PathOf("command"), "expected an array of strings (argv), got " + JsonTypeName(*c));
      return false;
    }
    if (c->empty() || c->size() > kMaxArgs) {
      *err = BadField(f.PathOf("command"), "expected 1 to " + std::to_string(kMaxArgs) + " strings");
      return false;
    }
    for (size_t i = 0; i < c->size(); ++i) {
      const std::string path = f.PathOf("command") + "[" + std::to_string(i) + "]";
      const json& a = (*c)[i];
      if (!a.is_string()) {
        *err = BadField(path, "expected a string, got " + JsonTypeName(a));
        return false;
      }
      const std::string& s = a.get_ref<const std::string&>();
      if (s.size() > kMaxArgBytes || !NoNul(s) || (i == 0 && s.empty())) {
        *err = BadField(path, i == 0 && s.empty() ? "the program must not be empty"
                                                  : "at most " + std::to_string(kMaxArgBytes) + " bytes, without NUL");
        return false;
      }
      task.command.push_back(s);
    }
  }
  return true;
}

// env: NAME: value strings; the agent's own variables refused.
bool EnvOf(const FieldReader& f, TaskSpec& task, ApiError* err) {
  if (const json* e = f.Find("env")) {
    if (!e->is_object()) {
      *err = BadField(f.PathOf("env"), "expected an object of NAME: value strings, got " + JsonTypeName(*e));
      return false;
    }
    if (e->size() > kMaxEnv) {
      *err = BadField(f.PathOf("env"), "at most " + std::to_string(kMaxEnv) + " variables");
      return false;
    }
    for (const auto& [name, value] : e->items()) {  // nlohmann's objects iterate in key order
      const std::string path = f.PathOf("env") + "." + name;
      if (!ValidEnvName(name)) {
        *err = BadField(path, "a variable name is letters, digits and _, not starting with a digit");
        return false;
      }
      if (name == "CUDA_VISIBLE_DEVICES" || name.rfind("CUDA_MPS_", 0) == 0 || name.rfind("GPUPOOL_", 0) == 0) {
        *err = BadField(path, "set by the agent from the job's placement; a job may not set it");
        return false;
      }
      if (!value.is_string()) {
        *err = BadField(path, "expected a string, got " + JsonTypeName(value));
        return false;
      }
      const std::string& v = value.get_ref<const std::string&>();
      if (v.size() > kMaxEnvValueBytes || !NoNul(v)) {
        *err = BadField(path, "at most " + std::to_string(kMaxEnvValueBytes) + " bytes, without NUL");
        return false;
      }
      task.env.emplace_back(name, v);
    }
  }
  return true;
}

// checkpoint_signal: a signal by name (kSignals).
bool CheckpointSignalOf(const FieldReader& f, TaskSpec& task, ApiError* err) {
  std::string signal;
  if (!f.String("checkpoint_signal", signal, 16, err)) return false;
  if (f.Has("checkpoint_signal")) {
    auto s = SignalFromName(signal);
    if (!s) {
      std::string known;
      for (const NamedSignal& n : kSignals) known += (known.empty() ? "" : ", ") + std::string(n.name);
      *err = BadField(f.PathOf("checkpoint_signal"), "unknown signal '" + signal + "' (known: " + known + ")");
      return false;
    }
    task.checkpoint_signal = *s;
  }
  return true;
}

// image, shm_gib and network: the container.
bool ContainerOf(const FieldReader& f, TaskSpec& task, ApiError* err) {
  if (const json* i = f.Find("image")) {
    if (!i->is_string()) {
      *err = BadField(f.PathOf("image"), "expected a string (\"host\" or an absolute path), got " + JsonTypeName(*i));
      return false;
    }
    const std::string& image = i->get_ref<const std::string&>();
    if (std::string why = ImageProblem(image); !why.empty()) {
      *err = BadField(f.PathOf("image"), why);
      return false;
    }
    task.image = image;
  }
  if (f.Has("shm_gib")) {
    double gib = 0;
    if (!f.Number("shm_gib", gib, 0, kMaxShmGib, err, /*lo_open=*/true)) return false;
    const int64_t mib = std::llround(gib * 1024);
    if (mib < 1) {
      *err = BadField(f.PathOf("shm_gib"), "must be at least 1 MiB (1/1024 GiB)");
      return false;
    }
    task.shm_mib = mib;
  }
  std::string network;
  if (!f.String("network", network, 16, err)) return false;
  if (f.Has("network")) {
    if (network != "host" && network != "isolated") {
      *err = BadField(f.PathOf("network"), "unknown network '" + network + "' (known: host, isolated)");
      return false;
    }
    task.network_isolated = network == "isolated";
  }
  return true;
}
}  // namespace

bool ParseTaskFields(const FieldReader& f, TaskSpec& task, ApiError* err) {
  if (!CommandOf(f, task, err)) return false;
  const bool has_command = !task.command.empty();
  for (std::string_view key : kTaskKeys) {
    if (key != "command" && f.Has(key) && !has_command) {
      *err = BadField(f.PathOf(key), "only for jobs that run a command (set command)");
      return false;
    }
  }
  if (!EnvOf(f, task, err)) return false;
  if (!f.String("working_dir", task.working_dir, kMaxPathBytes, err)) return false;
  if (f.Has("working_dir") && (task.working_dir.empty() || task.working_dir[0] != '/' || !NoNul(task.working_dir))) {
    *err = BadField(f.PathOf("working_dir"), "expected an absolute path");
    return false;
  }
  if (!CheckpointSignalOf(f, task, err)) return false;
  if (!TaskDuration(f, "checkpoint_timeout", task.checkpoint_timeout, err)) return false;
  if (!TaskDuration(f, "stop_grace", task.stop_grace, err)) return false;
  return ContainerOf(f, task, err);
}

void TaskToRequest(const TaskSpec& task, json& request) {
  if (task.empty()) return;
  request["command"] = task.command;
  if (!task.env.empty()) {
    json env = json::object();
    for (const auto& [k, v] : task.env) env[k] = v;
    request["env"] = std::move(env);
  }
  if (!task.working_dir.empty()) request["working_dir"] = task.working_dir;
  request["checkpoint_signal"] = SignalName(task.checkpoint_signal);
  request["checkpoint_timeout"] = FormatDuration(task.checkpoint_timeout);
  request["stop_grace"] = FormatDuration(task.stop_grace);
  if (!task.image.empty()) request["image"] = task.image;
  if (task.shm_mib != kDefaultShmMib) request["shm_gib"] = static_cast<double>(task.shm_mib) / 1024.0;
  if (task.network_isolated) request["network"] = "isolated";
}

}  // namespace gpupool
