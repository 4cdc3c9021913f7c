// `verlctl help [exit-codes|COMMAND]`.
#include <algorithm>

#include "cli/app.h"
#include "cli/output.h"
#include "common/error.h"

namespace verl::cli {

void register_help(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("help", "Show help for a command, or the table of exit codes");
  auto topic = std::make_shared<std::string>();
  cmd->add_option("topic", *topic, "exit-codes, or a command name");
  cmd->callback([&ctx, &app, topic] {
    if (topic->empty()) {
      *ctx.out << app.help();
      return;
    }
    if (*topic == "exit-codes") {
      if (ctx.output == OutputFormat::kJson) {
        nlohmann::ordered_json rows = nlohmann::ordered_json::array();
        for (const auto& e : exit_code_table())
          rows.push_back({{"code", static_cast<int>(e.code)}, {"name", e.name}, {"meaning", e.meaning}});
        print_json(*ctx.out, rows);
        return;
      }
      std::vector<std::vector<std::string>> rows;
      for (const auto& e : exit_code_table())
        rows.push_back({std::to_string(static_cast<int>(e.code)), std::string(e.name), std::string(e.meaning)});
      print_table(*ctx.out, {"CODE", "NAME", "MEANING"}, rows);
      return;
    }
    for (auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      if (sub->get_name() == *topic) {
        *ctx.out << sub->help(app.get_name());
        return;
      }
    }
    throw Error(ExitCode::kUsage, "no help topic '" + *topic + "'",
                "run 'verlctl help' for the commands, 'verlctl help exit-codes' for exit codes");
  });
}

}  // namespace verl::cli
