#include "worker/reference_worker.hpp"

#include "shared/byte_size.hpp"

#include <unistd.h>

#include <algorithm>
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

// A model's largest tensor, for the forward-pass term of the admission target. Real
// diffusion checkpoints keep their largest tensor near an eighth of the weights or below.
Bytes largest_tensor_of(Bytes bytes) { return bytes / 8; }

}  // namespace

ReferenceWorker::ReferenceWorker(WorkerRuntime& runtime, PackDescription pack)
    : runtime_(runtime), pack_(std::move(pack)) {
    runtime_.census().edit().pinned_ceiling = pack_.max_pinned_bytes;
    publish_census();
}

void ReferenceWorker::on_command(const Message& command) {
    switch (command.type()) {
        case MessageType::work_request: run_work(std::get<WorkRequest>(command.payload), command.header.correlation); break;
        case MessageType::partial_unload:
        case MessageType::detach: answer_unload(command); break;
        case MessageType::release_node_boundary:
        case MessageType::cast_epoch_boundary:
        case MessageType::full_release:
        case MessageType::partial_release:
        case MessageType::release_pins: answer_release(command); break;
        case MessageType::shutdown: unload_everything(); break;
        default: break;
    }
}

void ReferenceWorker::run_work(const WorkRequest& work, std::uint64_t correlation) {
    const auto generation = runtime_.generation();
    runtime_.send(encode(NodeStarted{work.prompt_epoch, work.node_index, 0}, generation, correlation));
    prompt_epoch_ = work.prompt_epoch;
    last_node_ = work.node_index;
    publish_census();
    const bool ok = run_node(work.node_name);
    const auto status = static_cast<std::uint32_t>(ok ? WorkStatus::ok : WorkStatus::failed);
    runtime_.send(encode(NodeFinished{work.prompt_epoch, work.node_index, status}, generation, correlation));
    runtime_.send(encode(WorkResult{work.prompt_epoch, work.node_index, status, runtime_.device().used_by_this_process()},
                         generation, correlation));
}

bool ReferenceWorker::run_node(const std::string& name) {
    const auto node = pack_.nodes.find(name);
    if (node == pack_.nodes.end()) {
        std::fprintf(stderr, "comfy-worker: no node '%s' in this pack\n", name.c_str());
        return false;
    }
    return std::all_of(node->second.begin(), node->second.end(), [this](const Step& step) { return run_step(step); });
}

bool ReferenceWorker::run_step(const Step& step) {
    Device& device = runtime_.device();
    switch (step.kind) {
        case StepKind::load_model: return load_model(step.model, step.bytes);
        case StepKind::drop_model: {
            const auto held = std::find_if(models_.begin(), models_.end(),
                                           [&](const auto& m) { return m.second.name == step.model; });
            if (held != models_.end()) drop_model(held->first);
            return true;
        }
        case StepKind::compute:
            // The buffer is there while the step computes, and stays after it.
            if (!hold_leftovers(step)) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(step.ms));
            return true;
        case StepKind::await_free_below: {
            // Another participant's load this node must come after: polled, as the
            // device's free bytes change without telling anyone.
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(step.ms);
            while (device.free_bytes() >= step.bytes) {
                if (std::chrono::steady_clock::now() >= deadline) {
                    std::fprintf(stderr, "comfy-worker: the device still had %llu bytes free after %u ms\n",
                                 static_cast<unsigned long long>(device.free_bytes()), step.ms);
                    return false;
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            return true;
        }
        case StepKind::pin: {
            // Pinning only speeds transfers up: a pin cut short by the host budget, or
            // refused by the device, is counted and the node goes on without it.
            const Bytes granted = runtime_.request_pin(step.bytes);
            if (granted < step.bytes || !device.pin_host(granted)) runtime_.census().edit().pin_errors += 1;
            publish_census();
            return true;
        }
        case StepKind::unpin:
            device.unpin_host(std::min(step.bytes, pinned_by_steps()));
            publish_census();
            return true;
    }
    return false;
}

bool ReferenceWorker::hold_leftovers(const Step& step) {
    Device& device = runtime_.device();
    const NodeLeftovers::Held growth = leftovers_.growth(prompt_epoch_, last_node_, {step.cast_buffer, step.patch_pins});
    if (growth.cast > 0 && !device.allocate(growth.cast)) {
        std::fprintf(stderr, "comfy-worker: out of device memory for a cast buffer of %s (%s free)\n",
                     format_byte_size(step.cast_buffer).c_str(), format_byte_size(device.free_bytes()).c_str());
        return false;
    }
    NodeLeftovers::Held added{growth.cast, 0};
    if (growth.pins > 0) {
        // As with a pin step: a patch pin cut short is counted, and the node goes on.
        const Bytes granted = runtime_.request_pin(growth.pins);
        if (granted < growth.pins) runtime_.census().edit().pin_errors += 1;
        if (granted > 0 && device.pin_host(granted)) added.pins = granted;
    }
    leftovers_.add(prompt_epoch_, last_node_, added);
    publish_census();
    return true;
}

Bytes ReferenceWorker::free_leftovers(NodeLeftovers::Held taken) {
    Device& device = runtime_.device();
    device.release(taken.cast);
    device.unpin_host(std::min(taken.pins, device.pinned_by_this_process()));
    publish_census();
    return taken.cast;
}

Bytes ReferenceWorker::pinned_by_steps() {
    const Bytes pinned = runtime_.device().pinned_by_this_process();
    return pinned - std::min(pinned, leftovers_.total().pins);
}

bool ReferenceWorker::load_model(const std::string& name, Bytes bytes) {
    auto held = std::find_if(models_.begin(), models_.end(), [&](const auto& m) { return m.second.name == name; });
    const Bytes missing = held == models_.end() ? bytes : held->second.total - held->second.loaded;
    // Asked even when nothing is missing: upstream's load_models_gpu frees its inference
    // memory (the target's forward-pass term, for the whole model's largest tensor) for a
    // model already loaded too, and the node's compute needs it.
    AdmissionRequest request{};
    request.streams = 1;
    request.bytes = missing;
    request.largest_tensor = largest_tensor_of(held == models_.end() ? bytes : held->second.total);
    // The model being loaded is kept, as upstream takes it out of the list first; our other
    // models are candidates like everyone's, so their evictions are answered while we wait.
    std::vector<std::uint64_t> keep;
    if (held != models_.end()) keep.push_back(machine_model_key(runtime_.slot(), held->first));
    const auto answer = runtime_.request_admission(request, keep, this);
    if (missing == 0) {
        // Nothing to load, whatever the answer; the use moves it to the front of the order,
        // as upstream's load_models_gpu re-inserts a loaded model at index 0.
        report_residency(held->first, true);
        return true;
    }
    if (!answer.granted) {
        std::fprintf(stderr, "comfy-worker: loading %s refused: needs %s, %s free, %s held by others\n", name.c_str(),
                     format_byte_size(answer.refusal.needed_bytes).c_str(),
                     format_byte_size(answer.refusal.device_free).c_str(),
                     format_byte_size(answer.refusal.held_by_others).c_str());
        return false;
    }
    Device& device = runtime_.device();
    if (!device.allocate(missing)) {
        std::fprintf(stderr, "comfy-worker: out of device memory loading %s (%s, %s free)\n", name.c_str(),
                     format_byte_size(missing).c_str(), format_byte_size(device.free_bytes()).c_str());
        return false;
    }
    if (held == models_.end()) {
        const std::uint64_t id = next_model_id_++;
        held = models_.emplace(id, HeldModel{name, bytes, bytes, 0, 0}).first;
        const auto kind = static_cast<std::uint16_t>(ModelKind::diffusion);
        ModelRegistered report{id, id, bytes, bytes, 0, kind, 0, 0, {}};
        set_name(report.name, name);  // as the pack file names it
        runtime_.send(encode(report, runtime_.generation()));
    } else {
        held->second.loaded = held->second.total;
    }
    report_residency(held->first, true);
    return true;
}

void ReferenceWorker::drop_model(std::uint64_t id) {
    const auto held = models_.find(id);
    if (held == models_.end()) return;
    runtime_.device().release(held->second.loaded);
    models_.erase(held);
    runtime_.send(encode(ModelDropped{id}, runtime_.generation()));
    publish_census();
}

Bytes ReferenceWorker::unload(std::uint64_t id, Bytes bytes) {
    const auto held = models_.find(id);
    if (held == models_.end()) return 0;
    HeldModel& model = held->second;
    const Bytes freed = std::min(bytes, model.loaded);
    runtime_.device().release(freed);
    model.loaded -= freed;
    auto& census = runtime_.census().edit();
    census.bytes_evicted += freed;
    if (freed > 0 && model.evicted_in_epoch == prompt_epoch_ && prompt_epoch_ != 0) census.churn += 1;
    model.evicted_in_epoch = prompt_epoch_;
    publish_census();
    return freed;
}

Bytes ReferenceWorker::unload_everything() {
    Bytes freed = free_leftovers(leftovers_.take_all());
    while (!models_.empty()) {
        const auto id = models_.begin()->first;
        freed += models_.begin()->second.loaded;
        drop_model(id);
    }
    runtime_.device().unpin_host(runtime_.device().pinned_by_this_process());
    publish_census();
    return freed;
}

void ReferenceWorker::answer_unload(const Message& command) {
    const auto generation = runtime_.generation();
    if (const auto* partial = std::get_if<PartialUnload>(&command.payload)) {
        const Bytes freed = unload(partial->model_id, partial->bytes);
        // The residency report goes first, as a real worker's may: the receipt carries the
        // same figure under the next sequence, so the ledger counts the freed bytes once.
        if (models_.count(partial->model_id)) report_residency(partial->model_id);
        runtime_.send(encode(UnloadReceipt{partial->model_id, partial->bytes, freed, next_sequence(partial->model_id),
                                           loaded_now(partial->model_id), 0, {}},
                             generation, command.header.correlation));
        return;
    }
    const auto& detach = std::get<Detach>(command.payload);
    const Bytes loaded = loaded_now(detach.model_id);
    const Bytes freed = unload(detach.model_id, loaded);
    runtime_.send(encode(UnloadReceipt{detach.model_id, loaded, freed, next_sequence(detach.model_id), 0, 0, {}},
                         generation, command.header.correlation));
    drop_model(detach.model_id);
}

void ReferenceWorker::answer_release(const Message& command) {
    // Receipts count device bytes, the memory a release is asked for; release_pins counts
    // the host memory it unpinned. Patch pins a boundary frees show in the census.
    Bytes asked = 0;
    Bytes freed = 0;
    Device& device = runtime_.device();
    switch (command.type()) {
        case MessageType::release_node_boundary: {
            const auto& boundary = std::get<ReleaseNodeBoundary>(command.payload);
            freed = free_leftovers(leftovers_.take_node(boundary.prompt_epoch, boundary.node_index));
            break;
        }
        case MessageType::cast_epoch_boundary:
            freed = free_leftovers(leftovers_.take_before(std::get<CastEpochBoundary>(command.payload).prompt_epoch));
            break;
        case MessageType::full_release: freed = unload_everything(); break;
        case MessageType::partial_release: {
            // What the ledger does not show goes first: whole cast buffers, then models.
            asked = std::get<PartialRelease>(command.payload).bytes;
            freed = free_leftovers({leftovers_.take_cast(asked), 0});
            for (auto& [id, model] : models_) {
                if (freed >= asked) break;
                freed += unload(id, asked - freed);
                report_residency(id);
            }
            break;
        }
        case MessageType::release_pins: {
            // Patch pins first: upstream re-creates them when next needed.
            asked = std::get<ReleasePins>(command.payload).bytes;
            const Bytes by_steps = pinned_by_steps();
            const Bytes patches = leftovers_.take_pins(asked);
            freed = patches + std::min(asked - patches, by_steps);
            device.unpin_host(freed);
            publish_census();
            break;
        }
        default: break;
    }
    ReleaseReceipt receipt{};
    receipt.release_type = command.header.type;
    receipt.bytes_requested = asked;
    receipt.bytes_freed = freed;
    runtime_.send(encode(receipt, runtime_.generation(), command.header.correlation));
}

void ReferenceWorker::report_residency(std::uint64_t id, bool just_used) {
    const std::uint64_t sequence = next_sequence(id);
    runtime_.send(encode(ResidencyReceipt{id, sequence, models_.at(id).loaded, 1, 1, static_cast<std::uint8_t>(just_used), {}},
                         runtime_.generation()));
}

std::uint64_t ReferenceWorker::next_sequence(std::uint64_t id) {
    const auto held = models_.find(id);
    return held == models_.end() ? 0 : ++held->second.sequence;
}

Bytes ReferenceWorker::loaded_now(std::uint64_t id) const {
    const auto held = models_.find(id);
    return held == models_.end() ? 0 : held->second.loaded;
}

void ReferenceWorker::publish_census() {
    auto& record = runtime_.census().edit();
    record.prompt_epoch = prompt_epoch_;
    record.last_node = last_node_;
    record.resident_set_bytes = resident_set_bytes();
    record.device_used_bytes = runtime_.device().used_by_this_process();
    record.cast_buffer_bytes = leftovers_.total().cast;
    runtime_.census().publish();
}

}  // namespace comfy::worker
