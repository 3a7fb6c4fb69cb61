// emo report: the plan report page (report/html_report.h) from a saved `emo optimize --json`.
#include <fmt/format.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "emo/base/file.h"
#include "emo/report/html_report.h"

namespace emo::cli {
namespace {

struct ReportArgs {
  std::string input;
  std::string output;
};

int RunReport(const ReportArgs& args) {
  auto text = ReadFileMaybeGzip(args.input);
  if (!text.ok()) return Fail("report", text.status());
  const nlohmann::json out = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) return Fail("report", ParseError(fmt::format("{}: not JSON", args.input)));
  Result<std::string> page = InvalidArgument("not drawn");
  try {
    page = report::ReportHtmlFromOptimizeJson(out);
  } catch (const nlohmann::json::exception& e) {  // a field the checks did not foresee
    return Fail("report", InvalidArgument(fmt::format("{}: cannot draw it: {}", args.input, e.what())));
  }
  if (!page.ok()) return Fail("report", InvalidArgument(fmt::format("{}: {}", args.input, page.status().message())));
  std::string output = args.output;
  if (output.empty()) {
    output = args.input;
    const size_t dot = output.rfind('.');
    const size_t slash = output.rfind('/');
    if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) output.resize(dot);
    output += ".html";
  }
  Status st = WriteFile(output, *page);
  if (!st.ok()) return Fail("report", st);
  fmt::print("wrote {} (the plan report: open it in a browser)\n", output);
  return 0;
}

}  // namespace

void SetupReport(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Draw the plan report (one self-contained HTML page, as `emo optimize --report`) from the JSON\n"
      "that `emo optimize --report F.html --json F.json` wrote");
  cmd->add_option("json", args->input, "The saved `emo optimize --json` file (may be gzipped)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--out", args->output, "The HTML file to write (default: the JSON's name with .html)")
      ->default_str("");
  cmd->callback([args, &exit_code] { exit_code = RunReport(*args); });
}

}  // namespace emo::cli
