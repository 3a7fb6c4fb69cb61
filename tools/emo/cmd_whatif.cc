#include "commands.h"
namespace emo::cli {
void SetupWhatif(CLI::App&, int&) {}
}
