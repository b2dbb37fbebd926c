#include "cli/k8s_command.h"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "config/job.h"
#include "k8s/manifest.h"

namespace ringpilot::cli {
namespace {

struct K8sArgs {
  std::string job_path;
  std::vector<std::string> sets;
};

int Render(const K8sArgs& args) {
  try {
    // Backend k8s whatever the file says: `k8s render` is how the job runs.
    const config::JobConfig config =
        config::LoadJobConfigFor(config::Backend::kK8s, args.job_path, args.sets);
    std::cout << k8s::RenderManifests(config);
    return 0;
  } catch (const config::ConfigError& e) {
    std::cerr << e.what() << "\n";
  } catch (const k8s::RenderError& e) {
    std::cerr << args.job_path << ": " << e.what() << "\n";
  }
  return 2;
}

}  // namespace

void AddK8sCommand(CLI::App& app) {
  auto args = std::make_shared<K8sArgs>();
  CLI::App* k8s = app.add_subcommand("k8s", "Kubernetes: render a Kubeflow MPIJob for a job");
  k8s->require_subcommand(1, 1);
  CLI::App* render = k8s->add_subcommand(
      "render", "Print the manifests (ConfigMap, PVC, MPIJob, PodMonitor) as multi-document YAML");
  render->add_option("JOB", args->job_path, "Job file (YAML)")->required();
  render->add_option("--set", args->sets, "Override a job key, e.g. --set k8s.image=IMAGE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("KEY=VALUE");
  render->callback([args] {
    const int status = Render(*args);
    std::cout.flush();
    std::exit(status);
  });
}

}  // namespace ringpilot::cli
