// The `shardsim` command: plan, simulate and validate the sharding of transformer training.
#include "cli/app.h"

int main(int argc, char** argv) { return shardsim::cli::Run(argc, argv); }
