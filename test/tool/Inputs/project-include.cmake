# Injected by a command line (-DCMAKE_PROJECT_INCLUDE=...): not the project's.
set(INJECTED_BY_THE_COMMAND_LINE ON)
