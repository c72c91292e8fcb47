#pragma once
// Read by the sources, edited by no rule: still mirrored under -o.
inline int epochs() { return 2; }
