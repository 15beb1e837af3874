"""comfyui-check's steps for remote objects (docs/PACKS.md, "Remote objects"): ComfyUI's
MODEL, CLIP, VAE, CONTROL_NET, CLIP_VISION and NOISE crossing into a pack's worker, a
pack's MODEL into ComfyUI's KSampler, and a host MODEL's model_options changed in place by
a pack, each graph's outputs bit-equal to the same graph in one process.

The pack is tests/packs/model_pack, run isolated as pack "model" under its own node
names; the same pack is also imported into ComfyUI's own process by the custom node
one_process/, which registers each of its nodes as "OneProcess" + its name. So each step
is one prompt holding both graphs over the same host objects, which tiny_models/ makes
with ComfyUI's own classes from a seed (no checkpoints here), and its output node shows
the SHA-256 of each output tensor's bytes: the isolated graph's and the one-process
graph's must be the same, and differ from the graph without the pack's node, so that
the pack's node is seen to have done something.
"""

import json
import os

from support import mib

SEED = 1
POSITIVE = "a red fox in the snow"
STEPS = [
    (6, "a pack patches the host's MODEL (clone, add_object_patch, its attention patch and CFG function) "
        "and the host's KSampler samples with it, bit-equal to one process", "step_patch"),
    (7, "a pack encodes with the host's CLIP and encodes and decodes with the host's VAE, bit-equal to one "
        "process", "step_clip_vae"),
    (8, "a pack applies the host's CONTROL_NET to CONDITIONING, sampled by the host, bit-equal to one process",
     "step_control"),
    (9, "a pack runs the host MODEL's diffusion model itself (a mirror over the host's weights), read as an "
        "attribute and by name (get_model_object), bit-equal to one process, the model once in the ledger",
     "step_mirror"),
    (10, "a pack loads its own MODEL and the host's KSampler samples with it, bit-equal to one process, the "
        "model the pack's in the ledger", "step_pack_model"),
    (11, "a pack runs the host CLIP_VISION's model itself (a mirror over the host's weights), bit-equal to one "
        "process", "step_clip_vision"),
    (12, "a pack changes the host MODEL's model_options in place (IPAdapter's attention replacement) and the "
        "host's KSampler samples with it, bit-equal to one process", "step_replace_attention"),
    (13, "a pack asks the host's NOISE (upstream's RandomNoise) for a latent's noise, bit-equal to one process",
     "step_noise"),
    (22, "a pack samples the host's MODEL with upstream's KSampler class (ComfyUI_Noise's Unsampler does: its "
         "CFGGuider reads hook_mode) on its replica, bit-equal to one process", "step_upstream_sampler"),
    (23, "a pack's post-CFG function evaluates the model again with upstream's calc_cond_batch (PAG and SEG do: "
         "it reads current_patcher), sampled by the host's KSampler in the pack, bit-equal to one process",
     "step_perturbed"),
    (32, "the host's SamplerCustomAdvanced with upstream's CFGGuider over a MODEL a pack patched, the guider "
         "sampled in the pack, bit-equal to one process", "step_guider"),
    (33, "the host's SamplerCustomAdvanced with upstream's DualCFGGuider (nested) over a MODEL a pack patched, "
         "the guider rebuilt with its state and sampled in the pack, bit-equal to one process", "step_dual_guider"),
    (34, "a pack encodes with the host's CLIP as its replica (upstream's SD1 CLIP over the host's text encoder "
         "mapped), and with a weight patch of its own on a clone, bit-equal to one process", "step_clip_replica"),
    (35, "a pack encodes and decodes with the host's SD1 VAE (a checkpoint's, as upstream's loaders make it), "
         "plain and tiled, and encodes an image with the host's CLIP_VISION, each as its replica over the host's "
         "weights mapped, bit-equal to one process", "step_vae_vision_replicas"),
]
# A weight of the tiny CLIP's text encoder that its last layer's output goes through.
CLIP_KEY = "clip_l.transformer.text_model.final_layer_norm.weight"
NOISE_SEED = 3


def node(class_type, **inputs):
    return {"class_type": class_type, "inputs": inputs}


def base():
    """The host's side of every graph: the tiny models, two conditionings, a latent, an image."""
    return {"tiny": node("ComfySupervisorCheckTinyModels", seed=SEED),
            "pos": node("CLIPTextEncode", clip=["tiny", 1], text=POSITIVE),
            "neg": node("CLIPTextEncode", clip=["tiny", 1], text=""),
            "latent": node("EmptyLatentImage", width=64, height=64, batch_size=1),
            "noise": node("ComfySupervisorCheckNoise", seed=5, width=64, height=64)}


def ksampler(model, positive=("pos", 0)):
    return node("KSampler", model=list(model), seed=7, steps=3, cfg=7.5, sampler_name="euler", scheduler="normal",
                positive=list(positive), negative=["neg", 0], latent_image=["latent", 0], denoise=1.0)


def digest(label, **inputs):
    return node("ComfySupervisorCheckDigest", label=label, **{k: list(v) for k, v in inputs.items()})


def both(class_type, **inputs):
    """The pack's node `class_type` isolated ("iso") and in ComfyUI's process ("one")."""
    return {"iso": node(class_type, **inputs), "one": node("OneProcess" + class_type, **inputs)}


def sampled_both(models, positives=(("pos", 0), ("pos", 0)), plain=None):
    """The host's KSampler over the isolated and the one-process graph's outputs, and their
    digests ("isolated", "one_process"); with `plain`, also the graph without the pack's
    node, its digest so named."""
    (iso_model, one_model), (iso_positive, one_positive) = models, positives
    added = {"k_iso": ksampler(iso_model, iso_positive), "k_one": ksampler(one_model, one_positive),
             "isolated": digest("isolated", latent=("k_iso", 0)),
             "one_process": digest("one process", latent=("k_one", 0))}
    if plain:
        added.update({"k_plain": ksampler(("tiny", 0)), plain: digest(plain, latent=("k_plain", 0))})
    return added


class RemoteSteps:
    def __init__(self, check):
        self.check = check

    def run(self):
        missing = self.missing_nodes()
        for number, title, method in STEPS:
            if missing:
                self.check.step(number, title, False, missing)
            else:
                getattr(self, method)(number, title)

    def missing_nodes(self):
        for name in ("PatchModel", "OneProcessPatchModel", "ComfySupervisorCheckTinyModels"):
            status, _ = self.check.http("GET", f"/object_info/{name}", timeout=10)
            if status != 200:
                return (f"not run: ComfyUI has no node {name} (GET /object_info/{name} answered {status}); "
                        "the pack's proxies or the check's custom nodes were not registered")
        return None

    # ---- running a graph ----

    def digests(self, prompt):
        """Runs `prompt`: ({digest node: [(tensor name, sha256, dtype, shape)...]}, [finite...], None), or
        (None, None, why it failed)."""
        _, entry, failure = self.check.run_prompt(prompt)
        if entry is None:
            return None, None, failure
        found, finite = {}, []
        for node_id, output in entry.get("outputs", {}).items():
            rows = output.get("digests") or []
            found[node_id] = [(r["name"], r["sha256"], r["dtype"], tuple(r["shape"])) for r in rows]
            finite += [r["finite"] for r in rows]
        return found, finite, None

    def worker(self, pack="model"):
        rows = [w for w in self.check.workers() if w.get("name") == pack]
        return f"pack {pack}'s worker pid {rows[0]['pid']}" if rows else f"no worker of pack {pack} listed"

    def compare(self, number, title, prompt, pairs, changed=(), also=None, pack="model"):
        """Runs `prompt` and requires each (isolated, one process) pair of digest nodes equal,
        each (with the pack, without) pair of `changed` different, and `also`, given the
        digests, to answer (ok, what it saw)."""
        found, finite, failure = self.digests(prompt)
        if found is None:
            self.check.step(number, title, False, failure)
            return None
        seen, ok = [], all(finite)
        for isolated, one in pairs:
            equal = bool(found.get(isolated)) and found.get(isolated) == found.get(one)
            ok = ok and equal
            seen.append(f"{isolated} {short(found.get(isolated))} {'==' if equal else '!='} {one} "
                        f"{short(found.get(one))}")
        for patched, plain in changed:
            differ = found.get(patched) != found.get(plain)
            ok = ok and differ
            seen.append(f"{plain} {short(found.get(plain))} {'differs' if differ else 'is the same: the pack did nothing'}")
        if also:
            good, text = also(found)
            ok = ok and good
            seen.append(text)
        if not all(finite):
            seen.append("a tensor is not finite")
        return ok, f"{'; '.join(seen)} ({self.worker(pack)})"

    # ---- the steps ----

    def compare_patched(self, number, title, node, key, **inputs):
        """`node` patches the host's MODEL, isolated and in one process, and the host's
        KSampler samples each: bit-equal to one another, and otherwise than unpatched."""
        prompt = base()
        graph = both(node, model=["tiny", 0], **inputs)
        prompt.update({f"{key}_iso": graph["iso"], f"{key}_one": graph["one"],
                       **sampled_both(((f"{key}_iso", 0), (f"{key}_one", 0)), plain="unpatched")})
        self.report(number, title, self.compare(number, title, prompt, [("isolated", "one_process")],
                                                [("isolated", "unpatched")]))

    def step_patch(self, number, title):
        self.compare_patched(number, title, "PatchModel", "patch", scale=1.05)

    def step_clip_vae(self, number, title):
        prompt = base()
        text = both("EncodeText", clip=["tiny", 1], text="a grey wolf")
        vae = both("VaeRoundTrip", vae=["tiny", 2], image=["noise", 0])
        prompt.update({"enc_iso": text["iso"], "enc_one": text["one"], "vae_iso": vae["iso"], "vae_one": vae["one"],
                       "clip_isolated": digest("isolated", conditioning=("enc_iso", 0)),
                       "clip_one_process": digest("one process", conditioning=("enc_one", 0)),
                       "vae_isolated": digest("isolated", image=("vae_iso", 0), latent=("vae_iso", 1)),
                       "vae_one_process": digest("one process", image=("vae_one", 0), latent=("vae_one", 1))})
        self.report(number, title, self.compare(number, title, prompt, [("clip_isolated", "clip_one_process"),
                                                                        ("vae_isolated", "vae_one_process")]))

    def step_control(self, number, title):
        prompt = base()
        graph = both("ApplyControl", conditioning=["pos", 0], control_net=["tiny", 3], image=["noise", 0], strength=0.8)
        prompt.update({"control_iso": graph["iso"], "control_one": graph["one"],
                       **sampled_both((("tiny", 0), ("tiny", 0)), (("control_iso", 0), ("control_one", 0)),
                                      plain="uncontrolled")})
        self.report(number, title, self.compare(number, title, prompt, [("isolated", "one_process")],
                                                [("isolated", "uncontrolled")]))

    def step_mirror(self, number, title):
        prompt = base()
        graph = both("MirrorForward", model=["tiny", 0])
        # by_name: the module read with model.get_model_object("diffusion_model"), as many packs do
        named = both("MirrorForward", model=["tiny", 0], by_name=True)
        prompt.update({"mirror_iso": graph["iso"], "mirror_one": graph["one"],
                       "isolated": digest("isolated", latent=("mirror_iso", 0)),
                       "one_process": digest("one process", latent=("mirror_one", 0)),
                       "named_iso": named["iso"], "named_one": named["one"],
                       "by_name_isolated": digest("by name isolated", latent=("named_iso", 0)),
                       "by_name_one_process": digest("by name one process", latent=("named_one", 0)),
                       # the host's own sampling in the same prompt: its model is loaded, in the ledger
                       "k_plain": ksampler(("tiny", 0)), "plain": digest("plain", latent=("k_plain", 0))})
        # both read the same host weights: the by-name mirror's output is the attribute's too
        outcome = self.compare(number, title, prompt, [("isolated", "one_process"),
                                                       ("by_name_isolated", "by_name_one_process"),
                                                       ("by_name_isolated", "isolated")])
        if outcome is None:
            return
        ok, seen = outcome
        size = self.unet_bytes()
        ledger = self.check.ledger()
        rows = [r for r in ledger if r.get("total_bytes") == size]
        once = len(rows) == 1 and rows[0].get("owner_slot") == 0
        packs = [r for r in ledger if r.get("owner") == "model"]
        where = ", ".join(f"{'host' if r.get('owner_slot') == 0 else r.get('owner')} model {r['model_id']}"
                          for r in rows) or "none"
        seen += (f"; ledger: models of {mib(size or 0)} (the UNet's size): {where}"
                 + (f"; pack model has {len(packs)} model(s) there, but a mirror registers nothing" if packs else ""))
        self.check.step(number, title, ok and once and not packs, seen)

    def tiny_models(self):
        status, raw = self.check.http("GET", "/comfyui_check/tiny_models")
        return json_of(raw) if status == 200 else {}

    def unet_bytes(self):
        return self.tiny_models().get("model_bytes")

    def step_pack_model(self, number, title):
        prompt = base()
        graph = both("LoadModel", name=["tiny", 4])
        prompt.update({"load_iso": graph["iso"], "load_one": graph["one"],
                       **sampled_both((("load_iso", 0), ("load_one", 0)))})
        outcome = self.compare(number, title, prompt, [("isolated", "one_process")])
        if outcome is None:
            return
        ok, seen = outcome
        built = self.tiny_models()
        size = built.get("model_bytes")
        # Named after the checkpoint the pack's loader read (host/model_names.py).
        file = os.path.basename(built.get("checkpoint") or "?")
        rows = self.check.wait_for(lambda: [r for r in self.check.ledger()
                                            if r.get("owner") == "model" and r.get("total_bytes") == size], 10)
        named = [r for r in rows if str(r.get("name", "")).endswith(f"({file})")]
        if rows:
            row = rows[0]
            seen += (f"; ledger: pack model's model {row['model_id']} \"{row.get('name', '')}\" "
                     f"{mib(row['loaded_bytes'] or 0)} of {mib(row['total_bytes'])} loaded"
                     + ("" if named else f" (expected a name ending in \"({file})\")"))
        else:
            owners = sorted({str(r.get("owner")) for r in self.check.ledger()})
            seen += (f"; the ledger has no model of pack model of {mib(size or 0)} (the UNet's size); "
                     f"owners there: {', '.join(owners) or 'none'}")
        self.check.step(number, title, ok and bool(named), seen)

    def step_clip_vision(self, number, title):
        # A CLIP_VISION of its own node: the other steps' base() does not build one.
        prompt = {"vision": node("ComfySupervisorCheckTinyClipVision", seed=SEED),
                  "noise": node("ComfySupervisorCheckNoise", seed=5, width=64, height=64)}
        graph = both("MirrorClipVision", clip_vision=["vision", 0], image=["noise", 0])
        prompt.update({"vision_iso": graph["iso"], "vision_one": graph["one"],
                       "isolated": digest("isolated", latent=("vision_iso", 0)),
                       "one_process": digest("one process", latent=("vision_one", 0))})
        self.report(number, title, self.compare(number, title, prompt, [("isolated", "one_process")]))

    def step_replace_attention(self, number, title):
        # The change is made in place on the clone's model_options, not by setting a new dict: isolated, only the
        # write-back to the host's object brings the replacement to the host's KSampler. Upstream's
        # BasicTransformerBlock looks patches_replace["attn2"] up by (block, index), then by the block alone,
        # ("middle", 0) for the tiny UNet's middle transformer; "unpatched" differing shows that it ran there.
        self.compare_patched(number, title, "ReplaceAttention", "replace", scale=1.1)

    def step_upstream_sampler(self, number, title):
        prompt = base()
        graph = both("SampleWithUpstream", model=["tiny", 0], positive=["pos", 0], negative=["neg", 0],
                     latent=["latent", 0], seed=7, steps=3)
        prompt.update({"up_iso": graph["iso"], "up_one": graph["one"],
                       "isolated": digest("isolated", latent=("up_iso", 0)),
                       "one_process": digest("one process", latent=("up_one", 0))})
        self.report(number, title, self.compare(number, title, prompt, [("isolated", "one_process")]))

    def step_perturbed(self, number, title):
        self.compare_patched(number, title, "PerturbedGuidance", "perturbed", scale=0.5)

    def step_guider(self, number, title):
        self.compare_guided(number, title, lambda model: node("CFGGuider", model=model, positive=["pos", 0],
                                                              negative=["neg", 0], cfg=7.5))

    def step_dual_guider(self, number, title):
        # Guider_DualCFG keeps cfg1, cfg2 and nested of its own (set_cfg) and a middle conditioning: its state.
        self.compare_guided(number, title, lambda model: node("DualCFGGuider", model=model, cond1=["pos", 0],
                                                              cond2=["neg", 0], negative=["neg", 0], cfg_conds=6.0,
                                                              cfg_cond2_negative=2.5, style="nested"))

    def step_clip_replica(self, number, title):
        prompt = base()
        for key, patch in (("plain", 0.0), ("patched", 0.05)):
            graph = both("HostClip", clip=["tiny", 1], text="a grey wolf", key=CLIP_KEY, patch=patch)
            prompt.update({f"{key}_iso": graph["iso"], f"{key}_one": graph["one"],
                           f"{key}_isolated": digest("isolated", conditioning=(f"{key}_iso", 0)),
                           f"{key}_one_process": digest("one process", conditioning=(f"{key}_one", 0))})

        def replicated(found):
            # The worker says once when a host object of a replicated kind crosses as a proxy.
            proxied = self.check.log_lines("the host's CLIP (CLIP) is used as a proxy")
            return not proxied, (proxied[0][-240:] if proxied else "the host's CLIP arrived as a replica")

        self.report(number, title, self.compare(number, title, prompt, [("plain_isolated", "plain_one_process"),
                                                                        ("patched_isolated", "patched_one_process")],
                                                [("patched_isolated", "plain_isolated")], also=replicated))

    def step_vae_vision_replicas(self, number, title):
        prompt = {"vae": node("ComfySupervisorCheckSdVae", seed=SEED),
                  "vision": node("ComfySupervisorCheckTinyClipVision", seed=SEED),
                  "noise": node("ComfySupervisorCheckNoise", seed=5, width=64, height=64)}
        vae = both("HostVae", vae=["vae", 0], image=["noise", 0])
        vision = both("HostClipVision", clip_vision=["vision", 0], image=["noise", 0])
        for side, name in (("iso", "isolated"), ("one", "one process")):
            prompt.update({f"vae_{side}": vae[side], f"vision_{side}": vision[side],
                           f"vae_{side}_plain": digest(name, latent=(f"vae_{side}", 0), image=(f"vae_{side}", 1)),
                           f"vae_{side}_tiled": digest(name, latent=(f"vae_{side}", 2), image=(f"vae_{side}", 3)),
                           f"vision_{side}_out": digest(name, latent=(f"vision_{side}", 0))})

        def replicated(found):
            # The worker says once when a host object of a replicated kind crosses as a proxy.
            proxied = [line for kind in ("VAE (VAE)", "CLIP_VISION (ClipVisionModel)")
                       for line in self.check.log_lines(f"the host's {kind} is used as a proxy")]
            return not proxied, (proxied[0][-240:] if proxied else "the host's VAE and CLIP_VISION arrived as replicas")

        self.report(number, title, self.compare(number, title, prompt,
                                                [("vae_iso_plain", "vae_one_plain"), ("vae_iso_tiled", "vae_one_tiled"),
                                                 ("vision_iso_out", "vision_one_out")], also=replicated))

    def compare_guided(self, number, title, guider):
        """The host's SamplerCustomAdvanced with the guider `guider(model)` makes, over a MODEL the test pack
        patched isolated and in one process, and over the host's own."""
        prompt = base()
        graph = both("PatchModel", model=["tiny", 0], scale=1.05)
        prompt.update({"patch_iso": graph["iso"], "patch_one": graph["one"],
                       "rnoise": node("RandomNoise", noise_seed=7),
                       "select": node("KSamplerSelect", sampler_name="euler"),
                       "sigmas": node("BasicScheduler", model=["tiny", 0], scheduler="normal", steps=3, denoise=1.0)})
        for key, model in (("iso", "patch_iso"), ("one", "patch_one"), ("plain", "tiny")):
            prompt[f"guider_{key}"] = guider([model, 0])
            prompt[f"sca_{key}"] = node("SamplerCustomAdvanced", noise=["rnoise", 0], guider=[f"guider_{key}", 0],
                                        sampler=["select", 0], sigmas=["sigmas", 0], latent_image=["latent", 0])
        prompt.update({"isolated": digest("isolated", latent=("sca_iso", 0)),
                       "one_process": digest("one process", latent=("sca_one", 0)),
                       "unpatched": digest("unpatched", latent=("sca_plain", 0))})
        self.report(number, title, self.compare(number, title, prompt, [("isolated", "one_process")],
                                                [("isolated", "unpatched")]))

    def step_noise(self, number, title):
        # Upstream's RandomNoise makes a Noise_RandomNoise, which crosses into the worker as a remote object: the
        # pack's generate_noise runs upstream's prepare_noise in the host. Its seed read by the pack, the INT
        # output, is the width of an EmptyImage, so that the digest's shape shows it.
        prompt = {"random": node("RandomNoise", noise_seed=NOISE_SEED),
                  "latent": node("EmptyLatentImage", width=32, height=32, batch_size=1)}
        graph = both("NoiseLatent", noise=["random", 0], latent=["latent", 0])
        prompt.update({"noise_iso": graph["iso"], "noise_one": graph["one"]})
        for side in ("iso", "one"):
            prompt[f"seed_{side}"] = node("EmptyImage", width=[f"noise_{side}", 1], height=1, batch_size=1, color=0)
        prompt.update({"isolated": digest("isolated", latent=("noise_iso", 0), image=("seed_iso", 0)),
                       "one_process": digest("one process", latent=("noise_one", 0), image=("seed_one", 0))})

        def seeds(found):
            widths = {side: width_of(found.get(side), "image") for side in ("isolated", "one_process")}
            return (set(widths.values()) == {NOISE_SEED},
                    f"NoiseLatent's seed {widths['isolated']} isolated, {widths['one_process']} in one process "
                    f"(RandomNoise's noise_seed {NOISE_SEED})")
        self.report(number, title, self.compare(number, title, prompt, [("isolated", "one_process")], also=seeds))

    def report(self, number, title, outcome):
        if outcome is not None:
            self.check.step(number, title, *outcome)


def short(rows):
    """A digest node's tensors as `name sha256[:12]`, for a line."""
    if not rows:
        return "(no output)"
    return "[" + ", ".join(f"{name} {sha[:12]}" for name, sha, _, _ in rows) + "]"


def width_of(rows, name):
    """The width of a digest node's IMAGE tensor `name` (its shape is [batch, height, width, channels]), or None."""
    shapes = [shape for row_name, _, _, shape in rows or () if row_name == name]
    return shapes[0][2] if shapes and len(shapes[0]) == 4 else None


def json_of(raw):
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
