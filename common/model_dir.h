// Where a job config's model path points: shared by the trainer (hf_model.h) and the job
// preflight that every node runs before a job's ranks start, so that both resolve a path alike.
// Torch-free; reads the filesystem and the environment (HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME,
// HOME) only. Thread-compatible.
#pragma once

#include <filesystem>
#include <string>

namespace verl::model_dir {

// A model path from a job config (key names it in errors) to a directory:
//  - "~" and "~/x" expand with $HOME; relative paths resolve against the working directory;
//  - an existing directory is returned (absolute);
//  - a path that is not one but looks like a hub id "org/name" is looked up in the Hugging Face
//    cache ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub):
//    models--org--name/snapshots/<revision>, the revision refs/main names when present, else the
//    newest snapshot; the choice is logged;
//  - anything else throws kInvalidConfig saying that verlctl reads local directories, where the
//    HF cache would keep the snapshot, and how to download it (huggingface-cli download org/name).
std::string resolve(const std::string& path, const std::string& key);

// $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
std::filesystem::path hub_cache_root();

}  // namespace verl::model_dir
