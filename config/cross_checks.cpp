// The rules that span several job keys (Loader::CrossCheck): each problem is recorded at the
// latest of its keys the user gave, and a rule is skipped when one of its keys was
// rejected on its own.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/run_variables.h"
#include "config/loader.h"
#include "config/value_rules.h"

namespace ringpilot::config::detail {

void Loader::CrossFail(const std::vector<std::string>& keys, const std::string& problem) {
  for (const auto& k : keys) {
    if (Rejected(k)) return;
  }
  Collect("", [&] { CrossFailAt(keys, problem); });
}

void Loader::CrossFailAt(const std::vector<std::string>& keys, const std::string& problem) {
  const Given* latest = nullptr;
  std::string latest_key;
  for (const auto& k : keys) {
    const auto it = given_.find(k);
    if (it != given_.end() && (latest == nullptr || it->second.ordinal > latest->ordinal)) {
      latest = &it->second;
      latest_key = k;
    }
  }
  if (latest != nullptr) Fail(latest->where, latest_key, problem);
  const auto section = sections_.find(keys.front().substr(0, keys.front().find('.')));
  Fail(section != sections_.end() ? section->second : root_, keys.front(), problem);
}

void Loader::CrossCheck() {
  const JobConfig& c = config_;
  if (RunsCommand(c)) {
    // The program takes its own arguments: a trainer key next to it would be ignored, and
    // an ignored key is a surprise. Each one given in the file (or --set) is named, in the
    // order given.
    std::vector<std::pair<int, std::string>> trainer_keys;  // (ordinal, path)
    for (const KeySpec& spec : Schema()) {
      const auto it = given_.find(spec.path);
      if (spec.trainer_only && it != given_.end()) {
        trainer_keys.emplace_back(it->second.ordinal, spec.path);
      }
    }
    std::sort(trainer_keys.begin(), trainer_keys.end());
    for (const auto& [ordinal, key] : trainer_keys) {
      Collect(key, [&, key = key] {
        Fail(given_.at(key).where, key,
             "only the built-in trainer reads " + key +
                 ", but launch.command runs your own program (give your program the setting "
                 "as an argument, or leave launch.command out to train model.name)");
      });
    }
  }
  const int64_t world = static_cast<int64_t>(c.world.nodes) * c.world.procs_per_node;
  const std::string world_text = "world size " + std::to_string(world) + " (world.nodes " +
                                 std::to_string(c.world.nodes) + " x world.procs_per_node " +
                                 std::to_string(c.world.procs_per_node) + ")";
  const std::vector<std::string> world_keys = {"world.nodes", "world.procs_per_node"};
  auto with_world = [&](const std::string& key) {
    return std::vector<std::string>{key, world_keys[0], world_keys[1]};
  };

  if (c.comm.first_bucket_mb > c.comm.bucket_mb) {
    CrossFail({"comm.first_bucket_mb", "comm.bucket_mb"},
              "comm.first_bucket_mb (" + detail::FormatDouble(c.comm.first_bucket_mb) +
                  ") must be <= comm.bucket_mb (" + detail::FormatDouble(c.comm.bucket_mb) + ")");
  }
  if (c.train.cuda_graphs && c.world.device == Device::kCpu) {
    CrossFail({"train.cuda_graphs", "world.device"},
              "train.cuda_graphs needs world.device cuda or auto, not cpu");
  }
  if (c.launch.backend == Backend::kLocal && c.world.nodes != 1) {
    CrossFail({"world.nodes", "launch.backend"},
              "launch.backend local runs on one node, but world.nodes is " +
                  std::to_string(c.world.nodes) + " (use backend mpi, slurm or k8s)");
  }
  if (c.launch.backend == Backend::kMpi) {
    if (c.launch.hosts.empty()) {
      CrossFail({"launch.backend", "launch.hosts"},
                "launch.backend mpi needs launch.hosts, one host:slots entry per node");
    } else if (static_cast<int64_t>(c.launch.hosts.size()) != c.world.nodes) {
      CrossFail({"launch.hosts", "world.nodes", "launch.backend"},
                "launch.backend mpi needs one launch.hosts entry per node: " +
                    std::to_string(c.launch.hosts.size()) + " hosts, world.nodes is " +
                    std::to_string(c.world.nodes));
    }
    for (const auto& h : c.launch.hosts) {
      if (h.slots < c.world.procs_per_node) {
        CrossFail({"launch.hosts", "world.procs_per_node"},
                  "host " + h.host + " has " + std::to_string(h.slots) +
                      " slots, fewer than world.procs_per_node (" +
                      std::to_string(c.world.procs_per_node) + ")");
        break;  // one line for the rule, naming the first host that breaks it
      }
    }
  }
  if (c.fault.straggler_rank >= world) {
    CrossFail(with_world("fault.straggler_rank"), "fault.straggler_rank " +
                                                      std::to_string(c.fault.straggler_rank) +
                                                      " is not a rank of " + world_text);
  }
  if (c.fault.crash_rank >= world) {
    CrossFail(with_world("fault.crash_rank"), "fault.crash_rank " +
                                                  std::to_string(c.fault.crash_rank) +
                                                  " is not a rank of " + world_text);
  }
  if (c.train.epochs == 0 && c.fault.crash_step > c.train.steps) {
    CrossFail({"fault.crash_step", "train.steps"},
              "fault.crash_step " + std::to_string(c.fault.crash_step) +
                  " is after the last step (train.steps " + std::to_string(c.train.steps) + ")");
  }
  if (c.data.kind == DataKind::kCifar) {
    if (c.data.train.empty())
      CrossFail({"data.kind", "data.train"}, "data.kind cifar needs data.train");
    if (c.model.name != ModelName::kResnet18Cifar) {
      CrossFail({"data.kind", "model.name"}, std::string("data.kind cifar (32x32 images) needs ") +
                                                 "model.name resnet18-cifar, not " +
                                                 ToString(c.model.name));
    }
    if (c.model.num_classes != 10 && c.model.num_classes != 100) {
      CrossFail({"data.kind", "model.num_classes"},
                "data.kind cifar has 10 (CIFAR-10) or 100 (CIFAR-100) classes, not " +
                    std::to_string(c.model.num_classes));
    }
  } else if (c.data.kind == DataKind::kImageFolder || c.data.kind == DataKind::kImageShards) {
    const std::string kind = std::string("data.kind ") + ToString(c.data.kind);
    if (c.data.train.empty()) CrossFail({"data.kind", "data.train"}, kind + " needs data.train");
    if (!IsImageModel(c.model.name)) {
      CrossFail(
          {"data.kind", "model.name"},
          kind + " needs an image model (resnet18-cifar, resnet50), not " + ToString(c.model.name));
    }
  } else if (c.data.kind == DataKind::kTokens) {
    if (c.data.train.empty())
      CrossFail({"data.kind", "data.train"}, "data.kind tokens needs data.train");
    if (IsImageModel(c.model.name)) {
      CrossFail({"data.kind", "model.name"},
                std::string("data.kind tokens (text for masked-LM) needs a BERT model, not ") +
                    ToString(c.model.name));
    }
  } else if (c.train.epochs > 0) {
    CrossFail({"train.epochs", "data.kind"},
              "train.epochs needs a dataset (data.kind cifar, image_folder, image_shards, "
              "tokens)");
  } else if (!c.data.train.empty() || !c.data.val.empty()) {
    CrossFail({"data.kind", c.data.train.empty() ? "data.val" : "data.train"},
              "data.train and data.val are read only by the dataset kinds, not synthetic");
  }
  if (c.model.vocab_size != 0 && IsImageModel(c.model.name)) {
    CrossFail(
        {"model.vocab_size", "model.name"},
        std::string("model.vocab_size applies to BERT models, not ") + ToString(c.model.name));
  } else if (c.data.kind == DataKind::kSynthetic && c.model.vocab_size != 0 &&
             c.model.vocab_size < kMinSyntheticVocabSize) {
    CrossFail({"model.vocab_size", "data.kind"},
              "synthetic token sequences need model.vocab_size 0 or at least " +
                  std::to_string(kMinSyntheticVocabSize) + ", not " +
                  std::to_string(c.model.vocab_size));
  }
  if (c.train.label_smoothing > 0 && !IsImageModel(c.model.name)) {
    CrossFail({"train.label_smoothing", "model.name"},
              std::string("train.label_smoothing applies to image models, not ") +
                  ToString(c.model.name));
  }
  if (c.train.lr_schedule == LrSchedule::kStep && c.train.lr_step_every == 0) {
    CrossFail({"train.lr_schedule", "train.lr_step_every"},
              "train.lr_schedule step needs train.lr_step_every > 0");
  }
  if (c.train.lr_warmup_epochs > 0) {
    if (c.train.epochs == 0) {
      CrossFail({"train.lr_warmup_epochs", "train.epochs"},
                "train.lr_warmup_epochs needs train.epochs (a warm-up in steps: "
                "train.lr_warmup_steps)");
    } else if (c.train.lr_warmup_epochs >= static_cast<double>(c.train.epochs)) {
      CrossFail({"train.lr_warmup_epochs", "train.epochs"},
                "train.lr_warmup_epochs " + detail::FormatDouble(c.train.lr_warmup_epochs) +
                    " leaves no epoch after the warm-up (train.epochs " +
                    std::to_string(c.train.epochs) + ")");
    }
    if (c.train.lr_warmup_steps > 0) {
      CrossFail({"train.lr_warmup_epochs", "train.lr_warmup_steps"},
                "train.lr_warmup_epochs and train.lr_warmup_steps are two ways to say the "
                "warm-up; give one");
    }
  }
  if (c.train.epochs == 0 && c.train.lr_warmup_steps >= c.train.steps &&
      c.train.lr_warmup_steps > 0) {
    CrossFail({"train.lr_warmup_steps", "train.steps"},
              "train.lr_warmup_steps " + std::to_string(c.train.lr_warmup_steps) +
                  " leaves no step after the warm-up (train.steps " +
                  std::to_string(c.train.steps) + ")");
  }
  if (MetricsPort(c.metrics, c.world.procs_per_node - 1) > 65535) {
    CrossFail({"metrics.port_base", "world.procs_per_node"},
              "metrics.port_base " + std::to_string(c.metrics.port_base) +
                  " + world.procs_per_node " + std::to_string(c.world.procs_per_node) +
                  " - 1 exceeds port 65535");
  }
  if (c.metrics.basic_auth_user.empty() != c.metrics.basic_auth_password_file.empty()) {
    CrossFail({"metrics.basic_auth_user", "metrics.basic_auth_password_file"},
              "metrics basic auth needs both metrics.basic_auth_user and "
              "metrics.basic_auth_password_file");
  }
}

}  // namespace ringpilot::config::detail
