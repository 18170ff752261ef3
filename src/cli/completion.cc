#include "src/cli/completion.h"

#include <cctype>
#include <iostream>
#include <vector>

namespace gpupool {
namespace {

struct Level {
  std::string path;  // subcommand names joined by '/' ("" for the root)
  std::vector<std::string> words;    // its subcommands and flags
  std::vector<std::string> valued;   // its flags that take a value
};

bool Shown(const CLI::App* a) { return !a->get_name().empty() && !a->get_group().empty(); }

void Collect(const CLI::App& app, const std::string& path, std::vector<Level>& out) {
  Level l{path, {}, {}};
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* a) { return Shown(a); })) {
    l.words.push_back(sub->get_name());
  }
  for (const CLI::Option* o : app.get_options([](const CLI::Option* o) { return o->nonpositional(); })) {
    std::vector<std::string> names;
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
    for (const std::string& n : o->get_snames()) names.push_back("-" + n);
    for (const std::string& n : names) {
      l.words.push_back(n);
      if (o->get_type_size() != 0) l.valued.push_back(n);
    }
  }
  out.push_back(std::move(l));
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* a) { return Shown(a); })) {
    Collect(*sub, path.empty() ? sub->get_name() : path + "/" + sub->get_name(), out);
  }
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& w : v) s += (s.empty() ? "" : " ") + w;
  return s;
}

// A shell function name from the program's name ("gpupool" -> "_gpupool").
std::string FunctionName(const std::string& program) {
  std::string f = "_";
  for (char c : program) f += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return f;
}

}  // namespace

std::string BashCompletionScript(const CLI::App& root, const std::string& program) {
  std::vector<Level> levels;
  Collect(root, "", levels);
  const std::string fn = FunctionName(program);
  std::string s = "# bash completion for " + program + " (made by `" + program + " completion bash`)\n";
  s += fn + "() {\n";
  s += "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"\" path=\"\" w i\n";
  s += "  (( COMP_CWORD > 0 )) && prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n";
  s += "  # The deepest subcommand named before the word being completed.\n";
  s += "  for (( i = 1; i < COMP_CWORD; i++ )); do\n";
  s += "    w=\"${COMP_WORDS[i]}\"\n";
  s += "    case \"${path:+$path/}$w\" in\n";
  for (const Level& l : levels) {
    if (!l.path.empty()) s += "      " + l.path + ") path=\"" + l.path + "\" ;;\n";
  }
  s += "    esac\n";
  s += "  done\n";
  s += "  local words=\"\" valued=\"\"\n";
  s += "  case \"$path\" in\n";
  for (const Level& l : levels) {
    s += "    \"" + l.path + "\") words=\"" + Join(l.words) + "\"; valued=\"" + Join(l.valued) + "\" ;;\n";
  }
  s += "  esac\n";
  s += "  if [[ -n \"$prev\" && \" $valued \" == *\" $prev \"* ]]; then\n";
  s += "    COMPREPLY=( $(compgen -f -- \"$cur\") )\n";
  s += "    return 0\n";
  s += "  fi\n";
  s += "  COMPREPLY=( $(compgen -W \"$words\" -- \"$cur\") )\n";
  s += "}\n";
  s += "complete -o default -F " + fn + " " + program + "\n";
  return s;
}

void AddCompletionCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("completion", "Print a shell completion script (bash)");
  cmd->require_subcommand(1);
  CLI::App* bash = cmd->add_subcommand("bash", "Bash: source <(gpupool completion bash), or save it in /etc/bash_completion.d/gpupool");
  bash->callback([&app] { std::cout << BashCompletionScript(app, "gpupool"); });
}

}  // namespace gpupool
