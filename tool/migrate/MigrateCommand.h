// The `migrate` subcommand, the default (MigrateCommand.cpp). Only main.cpp
// includes this.
#pragma once

namespace fabricize {

// `fabricize [migrate] ...`: argv[0] is the program, argv[1] may be
// "migrate" (skipped), the rest are migrate's options and sources.
int runMigrate(int argc, const char** argv);

}  // namespace fabricize
