// The bridge test pack's front-end file: ComfyUI serves it from the pack's folder, as it
// serves a pack it imported itself, though the pack runs in a worker of its own.
console.log("comfy-supervisor bridge_pack: front end loaded");
