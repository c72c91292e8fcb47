# The repository's compiler warnings, included by each project.
set(RESEARCH_WARNINGS -Wall)
