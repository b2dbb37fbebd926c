// `ringpilot k8s render` objects, parsed back with yaml-cpp.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "config/value_rules.h"
#include "k8s/manifest.h"

namespace ringpilot::k8s {
namespace {

using config::JobConfig;
using config::ParseJobConfig;

constexpr const char* kJob = R"(name: demo
world: {nodes: 2, procs_per_node: 4, device: cuda}
launch: {backend: k8s}
model: {name: resnet50}
k8s: {image: "registry.example.com/team/ringpilot:0.1", rdma_resource: rdma/ib,
      namespace: train, shm_size: 32Gi, storage_class: cephfs, checkpoint_size: 200Gi,
      run_as_user: 1234}
)";

JobConfig Job(const std::vector<std::string>& sets = {}) {
  return ParseJobConfig(kJob, "job.yaml", sets);
}

std::vector<YAML::Node> Render(const JobConfig& c) { return YAML::LoadAll(RenderManifests(c)); }

YAML::Node FindKind(const std::vector<YAML::Node>& docs, const std::string& kind) {
  for (const auto& d : docs) {
    if (d["kind"].as<std::string>() == kind) return d;
  }
  ADD_FAILURE() << "no " << kind;
  return YAML::Node();
}

YAML::Node Container(const YAML::Node& mpijob, const std::string& role) {
  return mpijob["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"][0];
}

TEST(K8sManifest, RendersFourDocumentsInOneNamespace) {
  const auto docs = Render(Job());
  ASSERT_EQ(docs.size(), 4u);
  std::set<std::string> kinds;
  for (const auto& d : docs) {
    kinds.insert(d["kind"].as<std::string>());
    EXPECT_EQ(d["metadata"]["namespace"].as<std::string>(), "train");
    EXPECT_EQ(d["metadata"]["labels"]["ringpilot.io/job"].as<std::string>(), "demo");
  }
  EXPECT_EQ(kinds,
            (std::set<std::string>{"ConfigMap", "PersistentVolumeClaim", "MPIJob", "PodMonitor"}));
}

TEST(K8sManifest, MpiJobLauncherRunsRingpilotOnTheConfigMap) {
  const YAML::Node job = FindKind(Render(Job()), "MPIJob");
  EXPECT_EQ(job["apiVersion"].as<std::string>(), "kubeflow.org/v2beta1");
  EXPECT_EQ(job["spec"]["slotsPerWorker"].as<int>(), 4);
  EXPECT_EQ(job["spec"]["mpiImplementation"].as<std::string>(), "OpenMPI");
  const YAML::Node launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"];
  EXPECT_EQ(launcher["replicas"].as<int>(), 1);
  EXPECT_EQ(Container(job, "Launcher")["command"].as<std::vector<std::string>>(),
            (std::vector<std::string>{kRingpilotPath, "run", "/etc/ringpilot/job.yaml", "--run-dir",
                                      "/checkpoints/demo"}));
  // A small fixed request for the launcher, no GPU.
  const YAML::Node lr = Container(job, "Launcher")["resources"];
  EXPECT_EQ(lr["requests"]["cpu"].as<std::string>(), kLauncherCpu);
  EXPECT_EQ(lr["requests"]["memory"].as<std::string>(), kLauncherMemory);
  EXPECT_EQ(lr["limits"]["memory"].as<std::string>(), kLauncherMemory);
  EXPECT_FALSE(lr["limits"]["nvidia.com/gpu"]);
  EXPECT_EQ(Container(job, "Launcher")["image"].as<std::string>(),
            "registry.example.com/team/ringpilot:0.1");
}

TEST(K8sManifest, WorkersGetGpusRdmaShmIpcLockAndNonRootUser) {
  const YAML::Node job = FindKind(Render(Job()), "MPIJob");
  const YAML::Node worker = job["spec"]["mpiReplicaSpecs"]["Worker"];
  EXPECT_EQ(worker["replicas"].as<int>(), 2);
  const YAML::Node c = Container(job, "Worker");
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 4);
  EXPECT_EQ(c["resources"]["limits"]["rdma/ib"].as<int>(), 1);
  // Defaults: 8 CPUs and 32Gi per rank; memory adds /dev/shm (32Gi here): 4 x 32 + 32 GiB.
  for (const char* kind : {"requests", "limits"}) {
    EXPECT_EQ(c["resources"][kind]["cpu"].as<std::string>(), "32") << kind;
    EXPECT_EQ(c["resources"][kind]["memory"].as<std::string>(), "163840Mi") << kind;
  }
  EXPECT_FALSE(c["resources"]["requests"]["nvidia.com/gpu"]);  // extended: limits only
  EXPECT_EQ(c["securityContext"]["capabilities"]["add"][0].as<std::string>(), "IPC_LOCK");
  const YAML::Node pod = worker["template"]["spec"];
  EXPECT_TRUE(pod["securityContext"]["runAsNonRoot"].as<bool>());
  EXPECT_EQ(pod["securityContext"]["runAsUser"].as<int>(), 1234);
  bool shm = false;
  for (const auto& v : pod["volumes"]) {
    if (v["name"].as<std::string>() != "dshm") continue;
    shm = true;
    EXPECT_EQ(v["emptyDir"]["medium"].as<std::string>(), "Memory");
    EXPECT_EQ(v["emptyDir"]["sizeLimit"].as<std::string>(), "32Gi");
  }
  EXPECT_TRUE(shm);
  bool mounted = false;
  for (const auto& m : c["volumeMounts"]) {
    mounted = mounted || (m["name"].as<std::string>() == "dshm" &&
                          m["mountPath"].as<std::string>() == "/dev/shm");
  }
  EXPECT_TRUE(mounted);
}

TEST(K8sManifest, CpuJobWithoutRdmaRequestsNoExtendedResources) {
  const YAML::Node job =
      FindKind(Render(Job({"world.device=cpu", "k8s.rdma_resource=\"\"", "k8s.cpu_per_rank=1500m",
                           "k8s.memory_per_rank=1Gi", "k8s.shm_size=512Mi"})),
               "MPIJob");
  const YAML::Node r = Container(job, "Worker")["resources"];
  EXPECT_FALSE(r["limits"]["nvidia.com/gpu"]);
  EXPECT_FALSE(r["limits"]["rdma/ib"]);
  EXPECT_EQ(r["requests"]["cpu"].as<std::string>(), "6");
  EXPECT_EQ(r["limits"]["memory"].as<std::string>(), "4608Mi");
}

TEST(K8sManifest, AutoDeviceRequestsAGpuPerRank) {
  const YAML::Node job = FindKind(Render(Job({"world.device=auto"})), "MPIJob");
  EXPECT_EQ(Container(job, "Worker")["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 4);
}

TEST(K8sManifest, ConfigMapHoldsTheResolvedJobForBackendMpi) {
  const YAML::Node cm = FindKind(Render(Job()), "ConfigMap");
  const JobConfig pod = ParseJobConfig(cm["data"]["job.yaml"].as<std::string>(), "configmap");
  EXPECT_EQ(pod.launch.backend, config::Backend::kMpi);
  ASSERT_EQ(pod.launch.hosts.size(), 2u);
  EXPECT_EQ(pod.launch.hosts[1].host, "demo-worker-1.demo-worker.train.svc");
  EXPECT_EQ(pod.launch.hosts[1].slots, 4);
  // "auto": each rank binds its pod's IP (KUBERNETES_SERVICE_HOST is set in the pod).
  EXPECT_EQ(pod.metrics.bind, "auto");
  EXPECT_EQ(pod.model.name, config::ModelName::kResnet50);
  // A loopback address could not be scraped over the pod network.
  const YAML::Node loopback =
      FindKind(Render(Job({"metrics.bind=127.0.0.1"})), "ConfigMap")["data"]["job.yaml"];
  EXPECT_EQ(ParseJobConfig(loopback.as<std::string>(), "configmap").metrics.bind, "0.0.0.0");
}

// A launch.command job (the program is in the image): the launcher pod's `ringpilot run`
// starts it on the workers, which get the same GPUs; the ConfigMap names the program and
// the metrics bind that the plugin in each rank serves on.
TEST(K8sManifest, CommandJobRunsTheProgramFromTheConfigMap) {
  const JobConfig c = ParseJobConfig(R"(name: demo
world: {nodes: 2, procs_per_node: 4, device: cuda}
launch: {backend: k8s, command: [python3, /app/train.py, --epochs, "3"]}
k8s: {image: "registry.example.com/team/train:1"}
)",
                                     "job.yaml");
  const std::vector<YAML::Node> docs = Render(c);
  const YAML::Node cm = FindKind(docs, "ConfigMap");
  const std::string text = cm["data"]["job.yaml"].as<std::string>();
  EXPECT_EQ(text.find("model:"), std::string::npos) << text;
  const JobConfig pod = ParseJobConfig(text, "configmap");
  EXPECT_EQ(pod.launch.command,
            (std::vector<std::string>{"python3", "/app/train.py", "--epochs", "3"}));
  EXPECT_EQ(pod.launch.backend, config::Backend::kMpi);
  EXPECT_EQ(pod.metrics.bind, "auto");  // the pod's address, resolved by each rank
  const YAML::Node job = FindKind(docs, "MPIJob");
  EXPECT_EQ(Container(job, "Launcher")["command"][1].as<std::string>(), "run");
  EXPECT_EQ(Container(job, "Worker")["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 4);
  // Two endpoints per rank: the process series `ringpilot exec` serves, then the NCCL
  // profiler plugin's one block up.
  const YAML::Node eps = FindKind(docs, "PodMonitor")["spec"]["podMetricsEndpoints"];
  ASSERT_EQ(eps.size(), 8u);
  for (size_t i = 0; i < eps.size(); ++i) {
    EXPECT_EQ(eps[i]["relabelings"][0]["replacement"].as<std::string>(),
              "$1:" + std::to_string(18400 + i));
  }
}

TEST(K8sManifest, PvcUsesStorageClassAndSize) {
  const YAML::Node pvc = FindKind(Render(Job()), "PersistentVolumeClaim");
  EXPECT_EQ(pvc["metadata"]["name"].as<std::string>(), "demo-checkpoints");
  EXPECT_EQ(pvc["spec"]["storageClassName"].as<std::string>(), "cephfs");
  EXPECT_EQ(pvc["spec"]["resources"]["requests"]["storage"].as<std::string>(), "200Gi");
  EXPECT_EQ(pvc["spec"]["accessModes"][0].as<std::string>(), "ReadWriteMany");
}

TEST(K8sManifest, PodMonitorScrapesEveryLocalRankOnEveryWorkerPod) {
  const YAML::Node pm = FindKind(Render(Job()), "PodMonitor");
  EXPECT_EQ(pm["apiVersion"].as<std::string>(), "monitoring.coreos.com/v1");
  EXPECT_EQ(pm["spec"]["selector"]["matchLabels"]["ringpilot.io/role"].as<std::string>(), "worker");
  const YAML::Node eps = pm["spec"]["podMetricsEndpoints"];
  ASSERT_EQ(eps.size(), 4u);  // procs_per_node: ports repeat on every pod
  for (size_t l = 0; l < eps.size(); ++l) {
    EXPECT_FALSE(eps[l]["honorLabels"]) << "our series carry no job label to keep";
    EXPECT_FALSE(eps[l]["scheme"]);
    const YAML::Node relabel = eps[l]["relabelings"];
    ASSERT_EQ(relabel.size(), 3u);
    EXPECT_EQ(relabel[0]["sourceLabels"][0].as<std::string>(), "__meta_kubernetes_pod_ip");
    EXPECT_EQ(relabel[0]["replacement"].as<std::string>(), "$1:" + std::to_string(18400 + l));
    EXPECT_EQ(relabel[0]["targetLabel"].as<std::string>(), "__address__");
    EXPECT_EQ(relabel[1]["targetLabel"].as<std::string>(), "ringpilot_job");
    EXPECT_EQ(relabel[1]["replacement"].as<std::string>(), "demo");
    EXPECT_EQ(relabel[2]["targetLabel"].as<std::string>(), "ringpilot_run");
  }
  const YAML::Node tls = FindKind(Render(Job({"metrics.tls_cert_file=/etc/rp/tls.pem"})),
                                  "PodMonitor")["spec"]["podMetricsEndpoints"][0];
  EXPECT_EQ(tls["scheme"].as<std::string>(), "https");
}

TEST(K8sManifest, NoPodMonitorWithoutMetrics) {
  EXPECT_EQ(Render(Job({"metrics.enabled=false"})).size(), 3u);
}

TEST(K8sManifest, NumericLookingStringsStayStrings) {
  const auto docs = Render(Job({"k8s.namespace=\"123\""}));
  EXPECT_EQ(docs[0]["metadata"]["namespace"].Tag(), "!");  // double-quoted: a string
}

TEST(K8sManifest, RejectsNamesThatAreNotDnsLabels) {
  EXPECT_THROW(RenderManifests(Job({"name=Demo"})), RenderError);
  EXPECT_THROW(RenderManifests(Job({"name=my_job"})), RenderError);
  EXPECT_THROW(RenderManifests(Job({"name=" + std::string(60, 'a')})), RenderError);
}

TEST(K8sManifest, RequiresAnImage) {
  try {
    RenderManifests(Job({"k8s.image=\"\""}));
    FAIL() << "rendered without an image";
  } catch (const RenderError& e) {
    EXPECT_NE(std::string(e.what()).find("k8s.image"), std::string::npos);
  }
}

TEST(K8sManifest, DataVolumesAreMountedInEveryWorkerAtTheirPaths) {
  const JobConfig c =
      Job({"k8s.volumes=[\"pvc:imagenet:/data:ro\", \"hostPath:/mnt/scratch:/scratch\", "
           "\"nfs:nfs.example.com:/exports/text:/text:ro\"]",
           "data.kind=image_folder", "data.train=/data/imagenet/train"});
  const YAML::Node job = FindKind(Render(c), "MPIJob");
  const YAML::Node spec = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"];
  std::map<std::string, YAML::Node> volumes, mounts;
  for (const YAML::Node& v : spec["volumes"]) volumes.emplace(v["name"].as<std::string>(), v);
  for (const YAML::Node& m : Container(job, "Worker")["volumeMounts"]) {
    mounts.emplace(m["name"].as<std::string>(), m);
  }
  ASSERT_TRUE(volumes.count("data-0") && volumes.count("data-1") && volumes.count("data-2"));
  EXPECT_EQ(volumes["data-0"]["persistentVolumeClaim"]["claimName"].as<std::string>(), "imagenet");
  EXPECT_TRUE(volumes["data-0"]["persistentVolumeClaim"]["readOnly"].as<bool>());
  EXPECT_EQ(volumes["data-1"]["hostPath"]["path"].as<std::string>(), "/mnt/scratch");
  EXPECT_EQ(volumes["data-1"]["hostPath"]["type"].as<std::string>(), "Directory");
  EXPECT_EQ(volumes["data-2"]["nfs"]["server"].as<std::string>(), "nfs.example.com");
  EXPECT_EQ(volumes["data-2"]["nfs"]["path"].as<std::string>(), "/exports/text");
  EXPECT_EQ(mounts["data-0"]["mountPath"].as<std::string>(), "/data");
  EXPECT_TRUE(mounts["data-0"]["readOnly"].as<bool>());
  EXPECT_EQ(mounts["data-1"]["mountPath"].as<std::string>(), "/scratch");
  EXPECT_FALSE(mounts["data-1"]["readOnly"].IsDefined());
  EXPECT_EQ(mounts["data-2"]["mountPath"].as<std::string>(), "/text");
  // The launcher runs `ringpilot run` and mpirun: no data.
  for (const auto& v : job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["volumes"]) {
    EXPECT_NE(v["name"].as<std::string>().rfind("data-", 0), 0u);
  }
}

TEST(K8sManifest, RelativeDataPathsAndOverlappingMountsAreRefused) {
  for (const std::vector<std::string>& sets : std::vector<std::vector<std::string>>{
           {"data.kind=image_folder", "data.train=imagenet/train"},
           {"data.kind=image_shards", "data.train=\"/data/a-*.tar, b-*.tar\""},
           {"data.kind=image_folder", "data.train=/data/train", "data.val=val"},
           {"k8s.volumes=[\"pvc:a:/data\", \"pvc:b:/data/sub\"]"}}) {
    try {
      RenderManifests(Job(sets));
      ADD_FAILURE() << "rendered: " << sets.back();
    } catch (const RenderError& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find("is relative") != std::string::npos ||
                  what.find("overlap") != std::string::npos)
          << what;
    }
  }
  // Absolute paths render (on a volume, or the image's own).
  EXPECT_NO_THROW(RenderManifests(
      Job({"data.kind=image_folder", "data.train=/data/train", "data.val=/data/val"})));
}

TEST(K8sConfigKeys, BadVolumesAreConfigErrors) {
  for (const std::string bad :
       {"k8s.volumes=[\"pvc:imagenet\"]", "k8s.volumes=[\"pvc:ImageNet:/data\"]",
        "k8s.volumes=[\"pvc:imagenet:data\"]", "k8s.volumes=[\"hostPath:mnt:/data\"]",
        "k8s.volumes=[\"nfs:server:/export\"]", "k8s.volumes=[\"s3:bucket:/data\"]",
        "k8s.volumes=[\"pvc:imagenet:/checkpoints/x\"]", "k8s.volumes=[\"pvc:imagenet:/\"]",
        "k8s.volumes=[\"pvc:imagenet:/data/../etc\"]", "k8s.volumes=[\"pvc:imagenet:/dev\"]",
        "k8s.volumes=[\"pvc:imagenet:/data:rw\"]"}) {
    EXPECT_THROW(Job({bad}), config::ConfigError) << bad;
  }
}

TEST(K8sConfigKeys, BadValuesAreConfigErrors) {
  for (const std::string bad :
       {"k8s.namespace=Train", "k8s.shm_size=16GB", "k8s.shm_size=0", "k8s.rdma_resource=ib",
        "k8s.image=\"a b\"", "k8s.image=\"$(id)\"", "k8s.run_as_user=0",
        "k8s.storage_class=Fast_SSD", "k8s.checkpoint_size=-1Gi", "k8s.cpu_per_rank=0",
        "k8s.memory_per_rank=32GB"}) {
    EXPECT_THROW(Job({bad}), config::ConfigError) << bad;
  }
}

}  // namespace
}  // namespace ringpilot::k8s
