// shmguard entry point: everything happens in cli::run.
#include "cli/commands.h"

int main(int argc, char** argv) { return shmguard::cli::run(argc, argv); }
