#include "commands.h"
namespace emo::cli {
void SetupAnalyze(CLI::App&, int&) {}
}
