#pragma once
// Where the supervisor's companions are: the Python package comfy_supervisor (first on a
// Python pack's PYTHONPATH) and libcomfy_participant.so (named to every participant in
// COMFY_SV_LIBRARY). A supervisor run where it was built uses the source tree's package
// and the build's library; one that cmake --install put in PREFIX/bin uses the installed
// copies, found relative to its own folder, so an installed tree works wherever it is
// and never reaches back into the source tree.

#include <string>

namespace comfy::supervisor {

// The folder that holds the package comfy_supervisor.
std::string python_package_dir();

// The library's path; empty if it is not there (a Python participant then looks for it
// itself, docs/INSTALL.md).
std::string participant_library();

}  // namespace comfy::supervisor
