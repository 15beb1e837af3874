#include "worker/reference_worker.hpp"

#include "shared/byte_size.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

namespace comfy::worker {

namespace {

std::uint64_t resident_set_bytes() {
    std::ifstream statm("/proc/self/statm");
    std::uint64_t size_pages = 0;
    std::uint64_t resident_pages = 0;
    statm >> size_pages >> resident_pages;
    return resident_pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

ReferenceWorker::ReferenceWorker(WorkerRuntime& runtime, PackDescription pack)
    : runtime_(runtime), pack_(std::move(pack)) {
    runtime_.census().edit().pinned_ceiling = pack_.max_pinned_bytes;
    publish_census(0, 0);
}

void ReferenceWorker::on_command(const Message& command) {
    const auto generation = runtime_.generation();
    const auto correlation = command.header.correlation;
    if (const auto* work = std::get_if<WorkRequest>(&command.payload)) {
        runtime_.send(encode(NodeStarted{work->prompt_epoch, work->node_index, 0}, generation, correlation));
        publish_census(work->prompt_epoch, work->node_index);
        const bool ok = run_node(work->node_name);
        const auto status = static_cast<std::uint32_t>(ok ? WorkStatus::ok : WorkStatus::failed);
        runtime_.send(encode(NodeFinished{work->prompt_epoch, work->node_index, status}, generation, correlation));
        runtime_.send(encode(WorkResult{work->prompt_epoch, work->node_index, status,
                                        runtime_.device().used_by_this_process()},
                             generation, correlation));
    } else if (command.type() == MessageType::shutdown) {
        release_everything();
    }
}

bool ReferenceWorker::run_node(const std::string& name) {
    const auto node = pack_.nodes.find(name);
    if (node == pack_.nodes.end()) {
        std::fprintf(stderr, "comfy-worker: no node '%s' in this pack\n", name.c_str());
        return false;
    }
    for (const auto& step : node->second) {
        if (!run_step(step)) return false;
    }
    return true;
}

bool ReferenceWorker::run_step(const Step& step) {
    Device& device = runtime_.device();
    switch (step.kind) {
        case StepKind::load_model: {
            if (loaded_models_.count(step.model)) return true;
            if (!device.allocate(step.bytes)) {
                std::fprintf(stderr, "comfy-worker: out of device memory loading %s (%s, %s free)\n",
                             step.model.c_str(), format_byte_size(step.bytes).c_str(),
                             format_byte_size(device.free_bytes()).c_str());
                return false;
            }
            loaded_models_[step.model] = step.bytes;
            return true;
        }
        case StepKind::drop_model: {
            const auto model = loaded_models_.find(step.model);
            if (model != loaded_models_.end()) {
                device.release(model->second);
                loaded_models_.erase(model);
            }
            return true;
        }
        case StepKind::compute: std::this_thread::sleep_for(std::chrono::milliseconds(step.ms)); return true;
        case StepKind::pin: {
            const bool ok = device.pin_host(step.bytes);
            if (!ok) {
                runtime_.census().edit().pin_errors += 1;
                runtime_.census().publish();
            }
            return ok;
        }
        case StepKind::unpin: device.unpin_host(step.bytes); return true;
    }
    return false;
}

void ReferenceWorker::release_everything() {
    for (const auto& [name, bytes] : loaded_models_) runtime_.device().release(bytes);
    loaded_models_.clear();
    runtime_.device().unpin_host(runtime_.device().pinned_by_this_process());
}

void ReferenceWorker::publish_census(std::uint64_t prompt_epoch, std::uint32_t node_index) {
    auto& record = runtime_.census().edit();
    record.prompt_epoch = prompt_epoch;
    record.last_node = node_index;
    record.resident_set_bytes = resident_set_bytes();
    runtime_.census().publish();
}

}  // namespace comfy::worker
