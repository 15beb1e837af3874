#pragma once
// comfyctl pack, env and adopt: the tool behind them (worker/python/comfy_supervisor/tools.py,
// which runs environments/, pack_check/ and adopt/) is Python, as what it drives is (venv,
// pip, uv, a pack's source and imports); comfyctl hands it the words as they are, with this
// install's comfy_supervisor first on its PYTHONPATH and the comfy-supervisor beside comfyctl
// in COMFY_SV_SUPERVISOR (the tool's import check starts the pack's worker through it, as a
// real start would), so that `comfyctl pack` is the one command whether the supervisor runs
// from a build or an install.

#include <string>
#include <vector>

namespace comfy::ctl {

// Replaces this process by `PYTHON -m comfy_supervisor.tools COMMAND ARGS...`, PYTHON being
// $COMFY_SV_TOOL_PYTHON when set, else python3 from PATH: the tool's output and exit status
// are the command's. Returns only when it could not start, with the one line saying why
// and what to install (`problem`).
void exec_python_tool(const std::string& command, const std::vector<std::string>& args, std::string& problem);

}  // namespace comfy::ctl
