// FSDP / ZeRO-3 for verlctl's models: the sharded ModuleEngine (trainer/module_engine.h).
//
// Units. Each decoder layer (model.layers.N.*) is one unit, as verl's transformer auto-wrap
// policy wraps them; the root unit holds everything else (embedding, final norm, LM head or
// value head). A unit's parameters are flattened in named_parameters order into one fp32
// vector, padded to a multiple of the group size W, and rank r keeps elements
// [r * n, (r + 1) * n) of it: its shard, a leaf tensor the optimizer steps.
//
// Hybrid sharding (fsdp_config.fsdp_size = S, 1 < S < world, S dividing it; torch's HYBRID_SHARD,
// verl's device mesh ["ddp", "fsdp"] = [world / S, S]): "the group" above is the shard group, S
// consecutive ranks (Distributed::subgroup); every shard group holds the same shards. A unit's
// gradient is reduce-scattered in the shard group, then all-reduced across the replicate group
// (the ranks at the same place in every shard group) and divided by the world: the world's mean,
// as DDP. The clip sums squares over the shard group only; each replica steps the same shard with
// the same gradient, so the replicas stay equal without a broadcast.
//
// Gathered parameters. Every parameter tensor of a unit is, for the module's whole life, a view
// of the unit's `full` buffer; the buffer's storage is allocated and filled by an all-gather
// while the unit is in use and freed (storage of 0 bytes; views keep their shapes) when not, as
// torch's FSDP does with storage resize. So the module's code runs unchanged.
//   - Decoder layers run through a LayerRunner (model.h): all-gather before the layer's
//     forward, free after it (reshard_after_forward; else kept until its backward); the backward
//     gathers again, runs the layer's backward (from the kept graph, or recomputed from the
//     saved input with enable_gradient_checkpointing), reduce-scatters the flat gradient and
//     hands the rank's averaged slice to the shard. Forwards without grad gather, run, free.
//   - The root unit is gathered for a ComputeScope; its parameters accumulate full gradients
//     during a mini-batch, reduce-scattered into the root shard at sync_gradients.
//   - Mixed precision (a bf16 compute dtype): gathers are fp32, and each gather of a layer is
//     cast to the compute dtype once (DecoderLayerImpl::cast_weights, model.h) inside the
//     layer's own graph, so gradients come back to the fp32 parameters through that one cast
//     and are reduce-scattered in fp32 (torch FSDP's param_dtype=bf16, reduce_dtype=fp32, which
//     casts before its all-gather rather than after).
// Offload: param_offload keeps shards and their gradients in CPU memory (pinned on CUDA hosts),
// copied to the device for each all-gather; optimizer_offload keeps the optimizer's copy of the
// shards (and so its moments) on the CPU and steps there.
// Checkpoints: model_world_size_W_rank_R.pt (the rank's shards, unit by unit, the layout and the
// shard group size S) and optim_world_size_W_rank_R.pt (AdamW's step and moments of those
// shards), written by every rank as verl does (W and R the world's; under hybrid sharding the
// replicas' files hold the same shards). Loading on the same W and S reads the rank's own file;
// otherwise it joins the first shard group's S files of a unit (ranks 0 .. S-1: the whole vector)
// and cuts the new rank's slice, so a run may resume on a different W or fsdp_size.
#pragma once

#include <memory>

#include "trainer/module_engine.h"

namespace verl::trainer {

// The sharded engine over dist (which must be a group of dist->world_size() ranks; a single
// rank works too: shards are the whole vectors, which is how offload runs on one GPU). With
// spec.fsdp.fsdp_size a divisor of the world size below it, hybrid: the engine forms (and owns)
// its shard and replicate groups from dist, so every rank must call it.
// `module`'s parameters must hold their full values (the same on every rank) and be float32.
std::unique_ptr<ModuleEngine> make_sharded_engine(torch::nn::Module& module, Distributed* dist,
                                                  const torch::Device& device, const EngineSpec& spec);

}  // namespace verl::trainer
