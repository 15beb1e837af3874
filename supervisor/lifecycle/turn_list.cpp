#include "supervisor/lifecycle/turn_list.hpp"

#include "supervisor/lifecycle/worker_process.hpp"

#include <algorithm>

namespace comfy::supervisor {

void TurnList::add(WorkerProcess& worker) {
    if (worker.pump.listed) return;
    worker.pump.listed = true;
    listed_.push_back(&worker);
}

void TurnList::remove(WorkerProcess& worker) {
    if (!worker.pump.listed) return;
    worker.pump.listed = false;
    std::erase(listed_, &worker);
}

void TurnList::take(std::vector<WorkerProcess*>& round) {
    round.clear();
    round.swap(listed_);
    for (WorkerProcess* worker : round) worker->pump.listed = false;
}

}  // namespace comfy::supervisor
