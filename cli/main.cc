// verlctl's entry point. All wiring lives in cli/app.cc; this file stays thin.
#include "cli/app.h"

int main(int argc, char** argv) { return verl::cli::run(argc, argv); }
