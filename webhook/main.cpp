// shmguard entry point: everything happens in cli::run.
#include <iostream>

#include "cli/app.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);  // `mutate -f -` reads stdin line by line
  return shmguard::cli::run(argc, argv);
}
